"""The same data sent whole to every rank of a group, each rank then keeping a part.

A broadcast (`broadcast`, `broadcast_object_list`, DDP's coalesced form) gives
every rank the root's data whole; that is right for weights every rank uses
whole, and waste for a batch each rank slices. The op alone cannot tell them
apart, so the evidence is what a rank does next, in the same step (without
steps, the next second) and the same process, through any later hop (a queue,
a socket, another collective):

- a leaf in a received storage (the same storage id, or a view the tracer wrote
  as lying in it) with at most half its bytes: a slice of it sent on (`batch[n:2n]`);
- a leaf whose storage, noted on a byte-moving hop, is the received tensor's
  size while the leaf is at most half of it: a view of it (`batch[r::world]`);
- a leaf whose leading dimension is the received leaf's over the group's size,
  with the same row shape or one figure a row (`[B, T]` in, `[B / world, T]` or
  `[B / world]` out): the rank worked on its rows only.

Values are never read. A rank whose later hops show none of these (weights
used whole, results of another size) gets no finding. *At stake*: what the
ranks other than the root received beyond their part, `bytes x (1 - 1/world)`
each, per step; the fix is a scatter (or per-rank sends) of each rank's part.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from flowmap.findings.common import DUPLICATE, Finding, per_step
from flowmap.findings.duplicates import carried, fanouts, group_size
from flowmap.model.format import seam_label
from flowmap.model.types import ARRAY_KINDS, role_of
from flowmap.read.events import Hop, Leaf, storage_bases
from flowmap.trace_format import GROUP, UNTRACED

if TYPE_CHECKING:
    from flowmap.model.view import RunView

PART_SHARE = 0.5  # a leaf at most this share of what arrived is a part of it
UNSTEPPED_NS = 1_000_000_000  # without steps, what a rank sends within 1 s is what it did next
Group = tuple[str, str]  # (the group's label, the op)
Round = tuple[str, str, int | None, tuple[Any, ...]]  # a group's op in a step, by what it carried
# (pid, step) -> (sender, name) -> (leaf bytes, storage bytes) of the views its hops sent
Notes = dict[tuple[int, int | None], dict[tuple[str, str], list[tuple[int, int]]]]


def detect(view: RunView) -> list[Finding]:
    hops = sorted(view.events.hops, key=lambda h: h.t_ns)
    notes = _storage_notes(view)
    bases = storage_bases(view.events.shards)  # a slice that starts inside what arrived
    mine: dict[int, list[Hop]] = defaultdict(list)  # pid -> its hops, in time order
    at: dict[int, int] = {}  # id(hop) -> its place in its process's list
    for h in hops:
        at[id(h)] = len(mine[h.pid])
        mine[h.pid].append(h)
    # Per broadcast round, its hops (the root's, the receivers') and whether a rank showed
    # it went on with a part: a round is its group, op, step and what it carried.
    rounds: dict[Round, list[Hop]] = defaultdict(list)
    shown: set[Round] = set()
    for h in hops:
        key = _broadcast(h)
        if key is None:
            continue
        r = (*key, h.step, _carried(h))
        rounds[r].append(h)
        world = group_size(key[0])
        if r not in shown and world >= 2 and \
                _keeps_a_part(h, mine[h.pid], at[id(h)] + 1, world, notes, bases):
            shown.add(r)
    total: dict[Group, float] = defaultdict(float)
    labels: dict[Group, set[str]] = defaultdict(set)
    who: dict[Group, set[str]] = defaultdict(set)
    counted: dict[Group, int] = defaultdict(int)
    for r in shown:
        group, op = key = (r[0], r[1])
        world = group_size(group)
        got = [h for h in rounds[r] if h.dst != group]
        sent = [h for h in rounds[r] if h.dst == group]
        # what each rank but the root received; only the root traced: what it sent, to each
        nbytes = sum(h.nbytes for h in got) if got else \
            sum(h.nbytes for h in sent) * (world - 1)
        total[key] += nbytes * (1 - 1 / world)
        labels[key].update(seam_label(h.seam) for h in rounds[r])
        who[key].update(role_of(h.src) for h in sent)
        counted[key] += 1
    out = _fanned_out(hops, mine, notes, bases, view.detail.num_steps)
    for key, at_stake in total.items():
        group, op = key
        bps = at_stake / view.detail.num_steps
        root = ", ".join(sorted(who[key])) or "the root"
        out.append(Finding(
            DUPLICATE, sorted(labels[key]), bps,
            f"{root}'s `{op}` sends the whole payload to every rank of {group}, and the ranks "
            f"go on with a part of it ({counted[key]} rounds show it): {per_step(bps)} "
            "beyond each rank's part; scatter each rank its own part instead.",
        ))
    return out


def _fanned_out(hops: list[Hop], mine: dict[int, list[Hop]], notes: Notes,
                bases: dict[tuple[int, int], int], steps: int) -> list[Finding]:
    """One message a transport delivered whole to several receivers (a PUB's), where a
    receiver went on with a part of it: all but one copy, per sender and seam name."""
    times = {pid: [h.t_ns for h in hs] for pid, hs in mine.items()}
    extra: dict[tuple[str, str], float] = defaultdict(float)
    labels: dict[tuple[str, str], set[str]] = defaultdict(set)
    shown: dict[tuple[str, str], int] = defaultdict(int)
    for group in fanouts(hops):
        world = len(group)
        for h in group:
            if h.arrived is None or h.arrived[0] not in mine:
                continue
            pid, storages = h.arrived  # the receiver, and its ids of what arrived
            got = replace(h, pid=pid, storages=storages)
            if _keeps_a_part(got, mine[pid], bisect_right(times[pid], h.t_ns), world, notes,
                             bases):
                key = (role_of(h.src), h.name)
                sizes = [carried(x) for x in group]
                extra[key] += sum(sizes) - max(sizes)
                labels[key].update(seam_label(x.seam) for x in group)
                shown[key] += 1
                break
    out = []
    for (src, name), nbytes in extra.items():
        bps = nbytes / steps
        out.append(Finding(
            DUPLICATE, sorted(labels[(src, name)]), bps,
            f"{src}'s `{name}` reaches every receiver whole, and they go on with a part of "
            f"it ({shown[(src, name)]} messages show it): {per_step(bps)} beyond one copy; "
            "send each receiver its own part instead."))
    return out


def _broadcast(h: Hop) -> Group | None:
    """(group, op) of a hop that carries a broadcast's data, at the root or at a receiver."""
    if h.transport != "collective" or "broadcast" not in h.name or not h.leaves:
        return None
    if h.dst.startswith(GROUP):
        return (h.dst, h.name)
    if h.src.startswith(GROUP):
        return (h.src, h.name)
    return None


def _carried(h: Hop) -> tuple[Any, ...]:
    """What a broadcast carried, by shape and dtype: one round's payload, not the next one's."""
    return tuple((leaf.shape, leaf.dtype) for leaf in h.leaves)


def _keeps_a_part(got: Hop, mine: list[Hop], start: int, world: int, notes: Notes,
                  bases: dict[tuple[int, int], int]) -> bool:
    """Whether a hop of this process after `got` (`mine[start:]`), in its step, carries a
    part of it."""
    whole = [leaf for leaf in got.leaves if leaf.kind in ARRAY_KINDS and leaf.nbytes]
    if not whole:
        return False
    sizes = dict(zip(got.storages, [leaf.nbytes for leaf in whole])) \
        if len(whole) == len(got.storages) else {}
    this = _broadcast(got)
    noted = notes.get((got.pid, got.step), {})
    for i in range(start, len(mine)):
        h = mine[i]
        if got.step is None and h.t_ns - got.t_ns > UNSTEPPED_NS:
            break
        if h.step != got.step:
            if h.step is not None and got.step is not None and h.step > got.step:
                break
            continue
        if this is not None and _broadcast(h) == this:
            if _carried(h) == _carried(got):
                break  # the next round of the same broadcast
            continue  # another payload broadcast beside it (tokens, then advantages)
        if h.src.startswith(GROUP) or h.src == UNTRACED:
            continue  # what arrived here, not what this rank sent on
        if _shows_a_part(h, whole, sizes, world, noted.get((h.src, h.name), []), bases):
            return True
    return False


def _shows_a_part(h: Hop, whole: list[Leaf], sizes: dict[int, int], world: int,
                  noted: list[tuple[int, int]], bases: dict[tuple[int, int], int]) -> bool:
    arrays = [leaf for leaf in h.leaves if leaf.kind in ARRAY_KINDS and leaf.nbytes]
    if len(arrays) == len(h.storages):
        for sid, leaf in zip(h.storages, arrays):
            b = sizes.get(sid, sizes.get(bases.get((h.pid, sid), -1)))
            if b is not None and leaf.nbytes <= PART_SHARE * b:
                return True  # a slice of the received storage
    got_bytes = {leaf.nbytes for leaf in whole}
    if any(storage in got_bytes and b <= PART_SHARE * storage for b, storage in noted):
        return True  # a view of a storage the size of the received one
    return any(_rows_of(leaf, w, world) for leaf in arrays for w in whole)


def _rows_of(part: Leaf, whole: Leaf, world: int) -> bool:
    """`part` holds `whole`'s rows over the group's size: `[B/world, ...]` with the same
    row shape, or one figure a row (`[B/world]`: rewards, lengths); a list of `B/world`
    samples shaped as the `B` that arrived."""
    if whole.count > 1 or part.count > 1:
        return whole.count >= 2 * world and part.count * world == whole.count \
            and part.shape == whole.shape
    if not part.shape or not whole.shape:
        return False
    n, total = part.shape[0], whole.shape[0]
    if type(n) is not int or type(total) is not int or total < 2 * world \
            or n * world != total:
        return False
    return len(part.shape) == 1 or tuple(part.shape[1:]) == tuple(whole.shape[1:])


def _storage_notes(view: RunView) -> Notes:
    """The views each process sent, by step and seam (`flowmap.capture.leaf_notes`)."""
    out: Notes = defaultdict(lambda: defaultdict(list))
    for sh in view.events.shards:
        for n in sh.notes:
            if n.storage_bytes:
                out[(n.pid, n.step)][(n.src, n.name)].append((n.nbytes, n.storage_bytes))
    return out
