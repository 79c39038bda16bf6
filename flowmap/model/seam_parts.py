"""A seam's figures in two parts: its folded steps' and its kept hops'.

`flowmap.model.aggregate.seam_stats` builds each seam's figures from two
parts: what its folded steps (`SeamStep`) give and what its kept hops give.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter

from flowmap.model.types import SeamKey
from flowmap.read.events import Hop, Leaf, SeamStep

# fields taken out of records in C
(_TRANSPORT, _ITEMS, _STEP, _HOPS, _NBYTES_SUM, _NBYTES_MIN, _NBYTES_MAX, _NUM_ITEMS, _T_FIRST,
 _T_NS, _LEAVES, _BLOCK, _NBYTES) = map(attrgetter, (
    "transport", "items", "step", "hops", "nbytes_sum", "nbytes_min", "nbytes_max", "num_items",
    "t_first_ns", "t_ns", "leaves", "block", "nbytes"))
_SEAM = attrgetter("src", "dst", "name")


@dataclass(slots=True, frozen=True)
class FoldedPart:
    """What a seam's figures take from its folded steps (sums, counts, least and largest,
    per-step and per-size counts)."""

    records: int
    hops: int
    total: int
    items: int
    step_bytes: dict[int | None, int]
    step_hops: dict[int | None, int]
    transports: dict[str, int]
    means: tuple[tuple[int, int], ...]  # (mean size, hops) of each step that took hops, in order
    sizes: dict[int, int]  # mean size -> hops: the percentiles' histogram
    t_lo: int  # least and largest time of any folded hop (0, 0 when none)
    t_hi: int
    low: int  # least and largest hop (0, 0 when none)
    high: int
    # id(schema) -> (schema, hops, each leaf's share of the bytes), in first-seen order
    schemas: dict[int, tuple[tuple[Leaf, ...], int, list[int]]]
    # the largest step's bytes and hops among blocks of old steps (a live watch's; 0: none),
    # whose steps are not in `step_bytes`
    block_bytes_max: int = 0
    block_hops_max: int = 0


def _folded_part(folded: Sequence[SeamStep]) -> FoldedPart:
    """The figures of a run of one seam's folded steps (fields taken out in C: this runs
    once per seam-step of a one-shot read, and on a live watch's new steps)."""
    if not folded:
        return NO_FOLDED
    ks = list(map(_HOPS, folded))
    bs = list(map(_NBYTES_SUM, folded))
    steps = list(map(_STEP, folded))
    blocks = list(filter(None, map(_BLOCK, folded)))
    step_bytes: dict[int | None, int]
    step_hops: dict[int | None, int]
    if blocks:  # a block's steps count by their own largest, never as one step
        own = [st.block is None for st in folded]
        steps, ks_own, bs_own = (list(compress(steps, own)), list(compress(ks, own)),
                                 list(compress(bs, own)))
        step_bytes, step_hops = {}, {}
        for step, k, b in zip(steps, ks_own, bs_own):
            step_bytes[step] = step_bytes.get(step, 0) + b
            step_hops[step] = step_hops.get(step, 0) + k
    elif len(set(steps)) == len(steps):  # one record per step (a long run's steps, most often)
        step_bytes, step_hops = dict(zip(steps, bs)), dict(zip(steps, ks))
    else:
        step_bytes, step_hops = {}, {}
        for step, k, b in zip(steps, ks, bs):
            step_bytes[step] = step_bytes.get(step, 0) + b
            step_hops[step] = step_hops.get(step, 0) + k
    transports: dict[str, int] = {}
    kinds = set(map(_TRANSPORT, folded))
    if len(kinds) == 1:
        (transport,) = kinds
        transports[transport] = sum(ks)
    else:
        for transport, k in zip(map(_TRANSPORT, folded), ks):
            transports[transport] = transports.get(transport, 0) + k
    means = tuple([(b // k, k) for b, k in zip(bs, ks) if k])
    sizes: Counter[int] = Counter()
    for mean, k in means:
        sizes[mean] += k
    firsts, lasts = list(map(_T_FIRST, folded)), list(map(_T_NS, folded))
    # Steps share their schema tuples: each leaf's share is summed once per schema.
    by_schema: dict[int, tuple[tuple[Leaf, ...], list[int], list[int]]] = {}
    schemas_of = list(map(_LEAVES, folded))
    if len(set(map(id, schemas_of))) == 1:  # one schema (most seams): no grouping
        by_schema[id(schemas_of[0])] = (schemas_of[0], ks, bs)
    else:
        for leaves, k, b in zip(schemas_of, ks, bs):
            got = by_schema.get(id(leaves))
            if got is None:
                got = by_schema[id(leaves)] = (leaves, [], [])
            got[1].append(k)
            got[2].append(b)
    schemas: dict[int, tuple[tuple[Leaf, ...], int, list[int]]] = {}
    for sid, (leaves, kk, bb) in by_schema.items():
        # A folded step's schema holds each leaf's largest size: its bytes are shared among
        # the leaves in that proportion, so leaf totals add up to the seam's (exact where
        # sizes were steady within the step).
        largest = sum(leaf.nbytes for leaf in leaves)
        schemas[sid] = (leaves, sum(kk), [
            sum([round(b * leaf.nbytes / largest) for b in bb]) if largest else 0
            for leaf in leaves])
    return FoldedPart(len(folded), sum(ks), sum(bs), sum(map(_NUM_ITEMS, folded)), step_bytes,
                   step_hops, transports, means, sizes, min(min(firsts), min(lasts)),
                   max(max(firsts), max(lasts)), min(map(_NBYTES_MIN, folded)),
                   max(map(_NBYTES_MAX, folded)), schemas,
                   max([b.bytes_max for b in blocks], default=0),
                   max([b.hops_max for b in blocks], default=0))


NO_FOLDED = FoldedPart(0, 0, 0, 0, {}, {}, {}, (), {}, 0, 0, 0, 0, {})


def folded_parts(folded: Sequence[SeamStep]) -> dict[SeamKey, FoldedPart]:
    """Each seam's part of a run of folded steps of any seams, by seam in first-seen order."""
    by_seam: dict[SeamKey, list[SeamStep]] = defaultdict(list)
    for st in folded:
        by_seam[(st.src, st.dst, st.name)].append(st)
    return {key: _folded_part(steps) for key, steps in by_seam.items()}


@dataclass(slots=True, frozen=True)
class KeptPart:
    """What a seam's figures take from its kept hops (in time order)."""

    hops: int
    hop_bytes: tuple[int, ...]
    total: int
    items: int
    per_step: dict[int | None, int]  # bytes per step
    hops_in_step: dict[int | None, int]
    transports: dict[str, int]
    sizes: Counter[int]  # hop size -> hops
    times: tuple[int, ...]  # the first hop's time and the last's (none when no hop)
    schemas: tuple[tuple[tuple[Leaf, ...], int], ...]  # (schema, hops), in first-seen order


def _kept_part(hops: list[Hop]) -> KeptPart:
    """A seam's `KeptPart` (counted in C where one can be: this reads every kept hop)."""
    hop_bytes = list(map(_NBYTES, hops))
    steps = list(map(_STEP, hops))
    hops_in_step: dict[int | None, int] = Counter(steps)
    per_step: dict[int | None, int] = {}
    if len(hops_in_step) == 1:
        per_step[steps[0]] = sum(hop_bytes)
    else:
        for step, b in zip(steps, hop_bytes):
            per_step[step] = per_step.get(step, 0) + b
    # Hops share their schema tuples (interned in the trace): each is merged once, weighted
    # by how many hops carried it.
    carried = list(map(_LEAVES, hops))
    ids = list(map(id, carried))
    schemas = dict(zip(ids, carried))
    return KeptPart(len(hops), tuple(hop_bytes), sum(hop_bytes), sum(map(len, map(_ITEMS, hops))),
                 per_step, hops_in_step, dict(Counter(map(_TRANSPORT, hops))), Counter(hop_bytes),
                 tuple(h.t_ns for h in hops[:1] + hops[-1:]),
                 tuple((schemas[sid], n) for sid, n in Counter(ids).items()))


NO_KEPT = KeptPart(0, (), 0, 0, {}, {}, {}, Counter(), (), ())


def kept_parts(hops: Sequence[Hop]) -> dict[SeamKey, KeptPart]:
    """Each seam's `KeptPart`, by seam in first-seen order."""
    by_seam: dict[SeamKey, list[Hop]] = defaultdict(list)
    for key, h in zip(map(_SEAM, hops), hops):  # seams taken out in C
        by_seam[key].append(h)
    return {key: _kept_part(seam_hops) for key, seam_hops in by_seam.items()}
