"""Bytes spent carrying items that were later discarded, by drop reason and role.

A hop's bytes are shared evenly among the items it carried; only hops up to
the drop count. A `flowmap.drop([], reason)` without item ids (what a framework
can say when its messages carry no ids) drops the message that last reached the
dropping owner before it (by when its receiver took it, not when it was sent: a queue's
messages may wait), each message once: its bytes, on the seam that
brought it. Ids that no message carried (the program's own uids, the dropped
objects themselves: `flowmap.drop(stale, "stale")`) are as many items of the
last messages that reached the owner, a message that held a list of k arrays
each (a batch of trajectories) counting as k items. A message that holds no data (no array, no storage: a version
number, an order) is not what was dropped when one that does came earlier:
the owner read the order to decide about the data.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings.common import DROPPED, Finding, RoleKey, per_step, role_key
from flowmap.model.format import seam_label
from flowmap.model.types import ARRAY_KINDS, ItemId, SeamKey, role_of

if TYPE_CHECKING:
    from flowmap.model.view import RunView
    from flowmap.read.events import Drop, Hop

DropKey = tuple[str, str]  # (reason, role where dropped)


def detect(view: RunView) -> list[Finding]:
    carried = {item for h in view.events.hops for item in h.items}
    first_drop: dict[ItemId, tuple[int, str, str]] = {}  # item -> (t_ns, role, reason)
    # drops no hop can be charged by id: (drop, how many ids it named; 0: a message)
    untracked: list[tuple[Drop, int]] = []
    for d in view.events.drops:
        known = [item for item in d.items if item in carried]
        if not known:
            # no ids, or ids no message carried (the program's own uids, the objects
            # themselves): each is a message, charged by `_messages_dropped`
            untracked.append((d, len(d.items)))
        for item in known:
            first_drop.setdefault(item, (d.t_ns, role_of(d.owner), d.reason))
    by_messages = _messages_dropped(view, untracked)
    if not first_drop:
        return by_messages
    return _items_dropped(view, first_drop) + by_messages


def _items_dropped(view: RunView, first_drop: dict[ItemId, tuple[int, str, str]]) -> list[Finding]:
    spent: dict[DropKey, float] = defaultdict(float)
    seams: dict[DropKey, dict[SeamKey, float]] = defaultdict(lambda: defaultdict(float))
    for h in view.events.hops:
        for item in h.items:
            drop = first_drop.get(item)
            if drop is not None and h.t_ns <= drop[0]:
                share = h.nbytes / len(h.items)
                spent[(drop[2], drop[1])] += share
                seams[(drop[2], drop[1])][h.seam] += share
    items: defaultdict[DropKey, int] = defaultdict(int)
    for _, owner, reason in first_drop.values():
        items[(reason, owner)] += 1
    out = []
    for (reason, owner), n in sorted(items.items()):
        bps = spent.get((reason, owner), 0.0) / view.detail.num_steps
        share = 100 * n / max(1, view.items.total)
        rode = seams.get((reason, owner), {})
        out.append(Finding(
            DROPPED, sorted(seam_label(k) for k in rode), bps,
            f"{n} items ({share:.0f}% of all) were dropped as `{reason}` at {owner} after "
            f"{per_step(bps)} had carried them there: {_advice(reason, rode)}.",
        ))
    return out


def _advice(reason: str, rode: dict[SeamKey, float]) -> str:
    if "stale" in reason.lower() or "off" in reason.lower():
        return ("keep fewer in flight (a lower watermark) or accept more staleness, so less is "
                "generated only to be thrown away")
    if not rode:
        return "produce fewer of them"
    # the role-level seam that carried most of them: the hop a filter placed before it spares
    by_role: dict[RoleKey, float] = defaultdict(float)
    for key, nbytes in rode.items():
        by_role[role_key(key)] += nbytes
    top = min(by_role, key=lambda k: (-by_role[k], k))
    return (f"most of it on `{seam_label(top)}`; filter them before that hop if `{reason}` "
            "is known there, or produce fewer")


def _reached(h: Hop) -> int:
    """When a message reached its receiver: its receive half's time, where it was joined to
    one (a queue's messages may wait there long after they were put), else its send's."""
    return h.t_ns if h.received_ns is None else h.received_ns


def _carries_data(h: Hop) -> bool:
    return bool(h.storages) or any(x.kind in ARRAY_KINDS or x.kind == "bytes" for x in h.leaves)


def _units(h: Hop) -> int:
    """How many items a message carried: the arrays' count in a list it holds (a batch of
    trajectories, `[*].tokens`), else one."""
    return max([x.count for x in h.leaves if x.kind in ARRAY_KINDS and "[*]" in x.path] or [1])


def _messages_dropped(view: RunView, untracked: list[tuple[Drop, int]]) -> list[Finding]:
    """Drops without item ids a message carried, each charged to the last messages into its
    owner before it: a drop without ids one message; one that names n ids no message carried
    (its objects, its own uids) n items, a message that held a batch of k items charged
    n / k of its bytes. Each item of a message is charged once."""
    drops = sorted(untracked, key=lambda dn: dn[0].t_ns)
    if not drops:
        return []
    # role -> hops, in time; data-carrying ones first when it takes them
    into: dict[str, list[tuple[int, int, SeamKey]]] = defaultdict(list)
    for i, h in enumerate(view.events.hops):
        if h.transport != "ref" and _carries_data(h):
            into[role_of(h.dst)].append((_reached(h), i, h.seam))
    for i, h in enumerate(view.events.hops):
        if h.transport != "ref" and not _carries_data(h) and role_of(h.dst) not in into:
            into[role_of(h.dst)].append((_reached(h), i, h.seam))
    for hops in into.values():
        hops.sort()
    left: dict[int, int] = {}  # message -> its items not yet charged
    spent: dict[DropKey, float] = defaultdict(float)
    count: dict[DropKey, int] = defaultdict(int)
    batched: set[DropKey] = set()
    seams: dict[DropKey, set[SeamKey]] = defaultdict(set)
    hops_of = view.events.hops
    for d, n in drops:
        role = role_of(d.owner)
        key = (d.reason, role)
        want = n or None  # None: one whole message
        for reached, i, _ in reversed(into.get(role, [])):
            if reached > d.t_ns:
                continue
            units = _units(hops_of[i])
            have = left.setdefault(i, units)
            if not have:
                continue
            take = have if want is None else min(want, have)
            left[i] = have - take
            spent[key] += hops_of[i].nbytes * take / units
            count[key] += 1 if want is None else take
            batched.update([key] if units > 1 else [])
            seams[key].add(hops_of[i].seam)
            if want is None:
                break
            want -= take
            if not want:
                break
    out = []
    for (reason, owner), n in sorted(count.items()):
        bps = spent[(reason, owner)] / view.detail.num_steps
        what = "items of batched messages" if (reason, owner) in batched else "messages"
        out.append(Finding(
            DROPPED, sorted(seam_label(k) for k in seams[(reason, owner)]), bps,
            f"{n} {what} were dropped as `{reason}` at {owner} after {per_step(bps)} had "
            f"carried them there: {_advice(reason, dict.fromkeys(seams[(reason, owner)], 1.0))}.",
        ))
    return out
