"""One storage copied to several destinations at once (same process, same step).

Storage ids are addresses: two hops from one sender in one step carrying the
same ids carry the same bytes. Hops by reference (`ref`) or by CUDA IPC handle copy nothing.

The same storage can also ride in several messages to one destination: a prompt's
image in each of its group's samples, each sample its own message. Pickled (a
queue, a pipe, ZMQ, an inline Ray value), every message carries it again; through
shared memory it moves once and the rest are handles, so only transports that
serialise each message count. The messages must each carry something new besides
(the samples' own tokens): a message that is only a buffer, sent again and again,
is more likely refilled in place than repeated.

A collective sends to every rank in one call: a root's `scatter` or
`scatter_object_list` whose list repeats a slot (a `ref` leaf where a rank's
slot is: the object of an earlier slot again) sends the same data whole to
several ranks, each of which needed its own part. Its extra bytes are what each
rank but the root received beyond its part, as a broadcast's (`broadcast_parts`):
the root's own slot never leaves it.

A process pool's tasks (`ProcessPoolExecutor`'s) each go to whichever worker is free:
the same storage in two tasks of a step is copied twice, to one worker or to two.

Bytes a sender serialised itself have no storage to follow: the same message (its
length and checksum) sent in one step to several destinations is one batch pickled
once and sent to every rank, each a copy (`same_messages`).

One message a transport delivers to several receivers (a PUB socket's, to each
subscriber) is no copy the sender made: weights every subscriber uses whole are
sent so. Whether the receivers went on with a part is `broadcast_parts`'s to read.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from flowmap.findings.common import DUPLICATE, Finding, RoleKey, norm_path, one_each, per_step
from flowmap.model.format import seam_label
from flowmap.model.types import ARRAY_KINDS, NO_COPY, role_of
from flowmap.read.events import Hop
from flowmap.trace_format import GROUP, PICKLE, RPC, SHM, UNTRACED, ZMQ

if TYPE_CHECKING:
    from flowmap.model.view import RunView

# Hops without a step are grouped by 100 ms windows instead.
WINDOW_NS = 100_000_000
When = int | tuple[str, int]
# (pid, sender, step, storages, each leaf's shape and dtype): a storage id is where a tensor
# starts, so `x` and `x[:1]` share one; the same data is the same storages *and* shapes
CopyKey = tuple[int, str, When, tuple[int, ...], tuple[tuple[Any, str], ...]]


def detect(view: RunView) -> list[Finding]:
    first: dict[CopyKey, Hop] = {}
    groups: dict[CopyKey, list[Hop]] = {}  # only keys seen more than once
    # one message the transport delivered to several receivers: not the sender's copies
    # (`flowmap.findings.broadcast_parts` reads whether they went on with a part)
    fanned = {id(h) for group in fanouts(view.events.hops) for h in group}
    for h in view.events.hops:
        if h.storages and h.transport not in NO_COPY and id(h) not in fanned:
            when: When = h.step if h.step is not None else ("t", h.t_ns // WINDOW_NS)
            key = (h.pid, h.src, when, h.storages,
                   tuple((leaf.shape, leaf.dtype) for leaf in h.leaves))
            seen = first.setdefault(key, h)
            if seen is not h:
                groups.setdefault(key, [seen]).append(h)
    extra: dict[RoleKey, float] = defaultdict(float)
    labels: dict[RoleKey, set[str]] = defaultdict(set)
    dests: dict[RoleKey, set[str]] = defaultdict(set)
    for group in groups.values():
        targets = {(h.dst, h.name) for h in group}
        if (len(targets) < 2 and not _pooled(group)) or _shared_read_only(group):
            continue
        rk = (role_of(group[0].src), "*", group[0].name)
        sizes = [carried(h) for h in group]
        extra[rk] += sum(sizes) - max(sizes)
        labels[rk].update(seam_label(h.seam) for h in group)
        dests[rk].update(h.dst for h in group)
    blobs: dict[RoleKey, float] = defaultdict(float)
    for group in same_messages(view.events.hops, fanned):
        rk = (role_of(group[0].src), "*", group[0].name)
        blobs[rk] += sum(h.nbytes for h in group) - max(h.nbytes for h in group)
        labels[rk].update(seam_label(h.seam) for h in group)
        dests[rk].update(h.dst for h in group)
    scattered: dict[RoleKey, float] = defaultdict(float)
    for h in view.events.hops:
        if repeats_a_slot(h):
            rk = (role_of(h.src), h.dst, h.name)
            world = group_size(h.dst)  # each rank but the root got its slot, 1/world its own
            scattered[rk] += h.nbytes / world * (world - 1) * (1 - 1 / world)
            labels[rk].add(seam_label(h.seam))

    def in_slots(rk: RoleKey, bps: float) -> str:
        return (f"{rk[0]}'s `{rk[2]}` puts the same object in several ranks' slots of {rk[1]}: "
                f"each gets it whole, {per_step(bps)} more than one part each; put each rank's "
                "own part in its slot.")

    def copied(rk: RoleKey, bps: float) -> str:
        return (f"The same `{rk[2]}` storage leaves {rk[0]} for {len(dests[rk])} destinations "
                f"({', '.join(sorted(dests[rk]))}), {per_step(bps)} in extra copies: slice it "
                "per destination if each reads a part, else share it once (shared memory, a "
                "broadcast) and pass handles.")

    def serialised_once(rk: RoleKey, bps: float) -> str:
        return (f"The same `{rk[2]}` message, byte for byte, leaves {rk[0]} for "
                f"{len(dests[rk])} destinations ({', '.join(sorted(dests[rk]))}), "
                f"{per_step(bps)} in extra copies: send each destination its part, or share "
                "it once and pass handles.")

    again, again_labels, again_paths = _repeated(view)

    def repeated(rk: RoleKey, bps: float) -> str:
        paths = ", ".join(f"`{p}`" for p in sorted(again_paths[rk])[:3])
        return (f"{rk[0]} sends the same {paths} again in several `{rk[2]}` messages to "
                f"{rk[1]} each step (each serialised anew), {per_step(bps)} in extra copies: "
                "send it once (once per group) and refer to it from the others.")

    return (one_each(DUPLICATE, view, scattered, labels, in_slots)
            + one_each(DUPLICATE, view, extra, labels, copied)
            + one_each(DUPLICATE, view, blobs, labels, serialised_once)
            + one_each(DUPLICATE, view, again, again_labels, repeated))


SERIALISED = (PICKLE, ZMQ, RPC)  # transports that write a storage into every message


def _repeated(view: RunView) -> tuple[dict[RoleKey, float], dict[RoleKey, set[str]],
                                      dict[RoleKey, set[str]]]:
    """Storages one sender serialises into several messages to the same destination and
    seam in one step (or 0.1 s), beside leaves new in each: all but one copy of each."""
    # (pid, seam, when) -> storage -> [times carried, its bytes, its path]
    carried_by: dict[tuple[Any, ...], dict[tuple[int, Any], list[Any]]] = defaultdict(dict)
    for h in view.events.hops:
        if h.transport not in SERIALISED or not h.storages or h.dst == UNTRACED:
            continue
        arrays = [leaf for leaf in h.leaves if leaf.kind in ARRAY_KINDS]
        if len(arrays) != len(h.storages) or len(set(h.storages)) < 2:
            continue  # storages and leaves must line up; one storage alone may be a buffer
        when: When = h.step if h.step is not None else ("t", h.t_ns // WINDOW_NS)
        seen = carried_by[(h.pid, h.seam, when)]
        for sid, leaf in dict(zip(h.storages, arrays)).items():
            entry = seen.setdefault((sid, leaf.shape), [0, leaf.nbytes, leaf.path])
            entry[0] += 1
    extra: dict[RoleKey, float] = defaultdict(float)
    labels: dict[RoleKey, set[str]] = defaultdict(set)
    paths: dict[RoleKey, set[str]] = defaultdict(set)
    for (_, seam, _), storages in carried_by.items():
        counts = [n for n, _, _ in storages.values()]
        if max(counts) < 2 or all(n == counts[0] for n in counts):
            continue  # nothing repeated, or nothing new beside it in each message
        rk = (role_of(seam[0]), role_of(seam[1]), seam[2])
        for n, nbytes, path in storages.values():
            if n >= 2:
                extra[rk] += (n - 1) * nbytes
                paths[rk].add(norm_path(path) or seam[2])
        labels[rk].add(seam_label(seam))
    return extra, labels, paths


MIN_SAME_MESSAGE = 64 << 10  # smaller messages alike may be commands, not a batch


def same_messages(hops: Iterable[Hop], fanned: set[int]) -> list[list[Hop]]:
    """Messages of bytes a sender serialised itself (no storage to follow) sent alike to
    several destinations in one step: the same length and checksum (`Hop.key`), a batch
    pickled once and its bytes sent to every rank. Not one message a transport delivered
    to several receivers (`fanned`)."""
    by: dict[tuple[Any, ...], list[Hop]] = defaultdict(list)
    for h in hops:
        if (h.key and not h.storages and h.transport in (PICKLE, ZMQ) and h.dst != UNTRACED
                and h.nbytes >= MIN_SAME_MESSAGE and id(h) not in fanned):
            when: When = h.step if h.step is not None else ("t", h.t_ns // WINDOW_NS)
            by[(h.pid, h.src, when, h.key)].append(h)
    return [group for group in by.values() if len({(h.dst, h.name) for h in group}) >= 2]


def fanouts(hops: Iterable[Hop]) -> list[list[Hop]]:
    """Messages a transport delivered to several receivers (a PUB's, one hop per
    subscriber): the hops of one send share its process, sender, name and time."""
    by: dict[tuple[int, str, str, int], list[Hop]] = defaultdict(list)
    for h in hops:
        if h.transport == ZMQ and h.dst != UNTRACED:
            by[(h.pid, h.src, h.name, h.t_ns)].append(h)
    return [group for group in by.values() if len({h.dst for h in group}) >= 2]


def _pooled(group: list[Hop]) -> bool:
    """Tasks of a `ProcessPoolExecutor` (its `_CallItem`s): each goes to whichever worker is
    free, so two to one worker are two copies as much as two to two workers."""
    return all(h.name == EXECUTOR_TASK for h in group)


EXECUTOR_TASK = "_CallItem"


def _shared_read_only(group: list[Hop]) -> bool:
    """One storage in shared memory handed to stages of different roles (reward functions
    that each read every row): each maps the one copy, and needs all of it, so nothing was
    copied for it. Ranks of one role (data parallel: `trainer/rank0`, `rank1`, `dp_2`)
    each keep a part: those are found."""
    return all(h.transport == SHM for h in group) and len({_rankless(h.dst) for h in group}) > 1


def _rankless(owner: str) -> str:
    """An owner's role, less a rank number however it is written (`rank3`, `dp/2`, `w_1`)."""
    return _RANK.sub("", role_of(owner))


_RANK = re.compile(r"[/_.-]?\d+$")


def carried(h: Hop) -> int:
    """What each destination got: through shared memory a hop is priced at what its process
    had not moved yet that step (`flowmap.read.shared_once`), but every receiver maps the
    whole payload, so the payload's own bytes."""
    if h.transport == SHM:
        return sum(leaf.nbytes for leaf in h.leaves)
    return h.nbytes


def repeats_a_slot(h: Hop) -> bool:
    """A root's scatter whose list holds one object in several ranks' slots, or the same
    tensor inside several slots (each its own small dict around the whole batch)."""
    return (h.transport == "collective" and "scatter" in h.name and "reduce" not in h.name
            and h.dst.startswith(GROUP)
            and (any(leaf.kind == "ref" and _is_slot(leaf.path) for leaf in h.leaves)
                 or len(set(h.storages)) < len(h.storages)))


def _is_slot(path: str) -> bool:
    """`[*]` or `[3]`: a whole slot of the scattered list, not a leaf inside one."""
    return path.startswith("[") and path.endswith("]") and path.count("[") == 1


def group_size(label: str) -> int:
    """`group[0,1]` -> 2, `group[0-3,8]` -> 5: the ranks a collective's group names."""
    n = 0
    for part in label[label.find("[") + 1 : label.rfind("]")].split(","):
        lo, _, hi = part.partition("-")
        try:
            n += int(hi) - int(lo) + 1 if hi else 1
        except ValueError:
            continue
    return max(n, 1)
