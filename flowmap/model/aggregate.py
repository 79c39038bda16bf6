"""Aggregate a run once: per seam, per owner, per counter, per item.

This is the one aggregation layer: the terminal report, the graph, the HTML,
`check`, `baseline` and `diff` all read these records, so a figure means the
same thing everywhere. Every output is sorted deterministically.

A seam's hops may be kept one by one (`Hop`) or folded per step
(`SeamStep`, past a long run's detail window): hops, total, smallest and
largest bytes and every per-step figure are exact either way. Percentiles
count each folded hop at its step's mean size (exact where a seam's size is
steady within a step); residency, like every figure that follows one item,
reads the kept hops only.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import add, attrgetter
from typing import TYPE_CHECKING, Protocol

from flowmap.model.memo import HopsMemo, PrefixMemo
from flowmap.model.processes import hosts_of, place_owners
from flowmap.model.types import (
    CounterStats,
    Dim,
    ItemEvent,
    ItemId,
    ItemLife,
    ItemStats,
    LeafStats,
    OwnerStats,
    SeamKey,
    SeamStats,
    Shape,
    role_of,
)
from flowmap.read.events import CounterFold, CounterSample, Drop, Hop, Leaf, SeamStep

if TYPE_CHECKING:
    from flowmap.read.records import Records

__all__ = ["HopSource", "SeamMemo", "counter_stats", "item_stats", "owner_stats", "percentile", "role_of",
           "seam_stats"]


class HopSource(Protocol):
    """What seam aggregation reads: a run, or a run seen at role level."""

    @property
    def hops(self) -> Sequence[Hop]: ...
    @property
    def seam_steps(self) -> Sequence[SeamStep]: ...
    @property
    def drops(self) -> Sequence[Drop]: ...
    @property
    def num_steps(self) -> int: ...


@dataclass(slots=True)
class _LeafAcc:
    """A leaf being merged across hops; frozen into `LeafStats` once all are seen."""

    path: str
    kind: str
    dtypes: list[str]
    shape: Shape
    dims: tuple[str, ...] | None
    total_bytes: int
    max_bytes: int
    hops: int
    ranks: tuple[int, int] = (0, 0)  # least and largest number of dims seen

    def freeze(self) -> LeafStats:
        lo, hi = self.ranks
        return LeafStats(self.path, self.kind, tuple(self.dtypes), self.shape, self.dims,
                         self.total_bytes, self.max_bytes, self.hops,
                         (lo, hi) if lo != hi else None)


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile of an ascending list (q in [0, 1])."""
    if not sorted_values:
        return 0
    rank = max(0, math.ceil(q * len(sorted_values)) - 1)
    return sorted_values[rank]


def weighted_percentile(sorted_pairs: Sequence[tuple[int, int]], q: float) -> int:
    """Nearest-rank percentile of ascending (value, count) pairs: `percentile` of them expanded."""
    total = sum(n for _, n in sorted_pairs)
    if not total:
        return 0
    rank = max(0, math.ceil(q * total) - 1)
    seen = 0
    for value, n in sorted_pairs:
        seen += n
        if seen > rank:
            return value
    return sorted_pairs[-1][0]


def seam_stats(run: HopSource, memo: SeamMemo | None = None) -> dict[SeamKey, SeamStats]:
    """`(src, dst, name) -> SeamStats`, heaviest first (ties by key, for determinism).

    `memo` (a live watch's, across its rebuilds): the folded steps that did not change
    since the last call are not read again, nor the kept hops if none changed; the
    figures are those computed without it.
    """
    kept = memo.kept.of(run.hops) if memo is not None else _kept_parts(run.hops)
    parts = (memo.parts({None: run.seam_steps})[None] if memo is not None
             else _folded_parts(run.seam_steps))
    residency = _residency(run)
    keys = list(kept) + [k for k in parts if k not in kept]
    out = [_one_seam(key, kept.get(key, _NO_KEPT), parts.get(key, _NO_FOLDED), run.num_steps,
                     residency.get(key)) for key in keys]
    out.sort(key=lambda s: (-s.total_bytes, s.key))
    return {s.key: s for s in out}


_TRANSPORT = attrgetter("transport")
_ITEMS = attrgetter("items")
_STEP = attrgetter("step")
_HOPS = attrgetter("hops")
_NBYTES_SUM = attrgetter("nbytes_sum")
_NBYTES_MIN = attrgetter("nbytes_min")
_NBYTES_MAX = attrgetter("nbytes_max")
_NUM_ITEMS = attrgetter("num_items")
_T_FIRST = attrgetter("t_first_ns")
_T_NS = attrgetter("t_ns")
_LEAVES = attrgetter("leaves")
_BLOCK = attrgetter("block")
_NBYTES = attrgetter("nbytes")
_SEAM = attrgetter("src", "dst", "name")


@dataclass(slots=True, frozen=True)
class _Folded:
    """What a seam's figures take from a run of its folded steps, in a form two adjacent
    runs of them add up in (sums, counts, least and largest, per-step and per-size
    counts): a live watch keeps the part of the steps that no longer change."""

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

    def plus(self, later: _Folded) -> _Folded:
        """This part followed by `later` (neither is changed)."""
        if not later.records:
            return self
        if not self.records:
            return later
        step_bytes, step_hops = dict(self.step_bytes), dict(self.step_hops)
        for step, b in later.step_bytes.items():
            step_bytes[step] = step_bytes.get(step, 0) + b
        for step, k in later.step_hops.items():
            step_hops[step] = step_hops.get(step, 0) + k
        transports = dict(self.transports)
        for t, k in later.transports.items():
            transports[t] = transports.get(t, 0) + k
        sizes = Counter(self.sizes)
        sizes.update(later.sizes)
        schemas = dict(self.schemas)
        for sid, (leaves, k, shares) in later.schemas.items():
            got = schemas.get(sid)
            schemas[sid] = (leaves, k, shares) if got is None else (
                leaves, got[1] + k, list(map(add, got[2], shares)))
        return _Folded(self.records + later.records, self.hops + later.hops,
                       self.total + later.total, self.items + later.items, step_bytes,
                       step_hops, transports, self.means + later.means, sizes,
                       min(self.t_lo, later.t_lo), max(self.t_hi, later.t_hi),
                       min(self.low, later.low), max(self.high, later.high), schemas,
                       max(self.block_bytes_max, later.block_bytes_max),
                       max(self.block_hops_max, later.block_hops_max))


def _folded_part(folded: Sequence[SeamStep]) -> _Folded:
    """The figures of a run of one seam's folded steps (fields taken out in C: this runs
    once per seam-step of a one-shot read, and on a live watch's new steps)."""
    if not folded:
        return _NO_FOLDED
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
    return _Folded(len(folded), sum(ks), sum(bs), sum(map(_NUM_ITEMS, folded)), step_bytes,
                   step_hops, transports, means, sizes, min(min(firsts), min(lasts)),
                   max(max(firsts), max(lasts)), min(map(_NBYTES_MIN, folded)),
                   max(map(_NBYTES_MAX, folded)), schemas,
                   max([b.bytes_max for b in blocks], default=0),
                   max([b.hops_max for b in blocks], default=0))


_NO_FOLDED = _Folded(0, 0, 0, 0, {}, {}, {}, (), {}, 0, 0, 0, 0, {})


def _folded_parts(folded: Sequence[SeamStep]) -> dict[SeamKey, _Folded]:
    """Each seam's part of a run of folded steps of any seams, by seam in first-seen order."""
    by_seam: dict[SeamKey, list[SeamStep]] = defaultdict(list)
    for st in folded:
        by_seam[(st.src, st.dst, st.name)].append(st)
    return {key: _folded_part(steps) for key, steps in by_seam.items()}


def _plus_parts(earlier: dict[SeamKey, _Folded], later: dict[SeamKey, _Folded]
                ) -> dict[SeamKey, _Folded]:
    """Each seam's part of two adjacent runs of folded steps (neither is changed)."""
    if not later:
        return earlier
    if not earlier:
        return later
    out = dict(earlier)
    for key, part in later.items():
        got = out.get(key)
        out[key] = part if got is None else got.plus(part)
    return out


class SeamMemo(PrefixMemo[None, dict[SeamKey, _Folded]]):
    """The per-seam figures of the run's folded steps that did not change since the last
    call of `seam_stats`, all seams at once (`flowmap.model.memo`). The records are in time
    order and only the latest still take hops, so a live watch's rebuild groups by seam and
    reads only those after the first that changed, not each of a long run's records. And
    each seam's part of the kept hops, while they stay the same."""

    def __init__(self) -> None:
        super().__init__(_folded_parts, _plus_parts, {})
        # each seam's part of the kept hops, while they stay the same
        self.kept: HopsMemo[dict[SeamKey, _Kept]] = HopsMemo(_kept_parts)


@dataclass(slots=True, frozen=True)
class _Kept:
    """What a seam's figures take from its kept hops (in time order): a live watch keeps
    it while the kept hops stay the same, as they do once the detail window is full."""

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


def _kept_part(hops: list[Hop]) -> _Kept:
    """A seam's `_Kept` (counted in C where one can be: this reads every kept hop)."""
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
    return _Kept(len(hops), tuple(hop_bytes), sum(hop_bytes), sum(map(len, map(_ITEMS, hops))),
                 per_step, hops_in_step, dict(Counter(map(_TRANSPORT, hops))), Counter(hop_bytes),
                 tuple(h.t_ns for h in hops[:1] + hops[-1:]),
                 tuple((schemas[sid], n) for sid, n in Counter(ids).items()))


_NO_KEPT = _Kept(0, (), 0, 0, {}, {}, {}, Counter(), (), ())


def _kept_parts(hops: Sequence[Hop]) -> dict[SeamKey, _Kept]:
    """Each seam's `_Kept`, by seam in first-seen order."""
    by_seam: dict[SeamKey, list[Hop]] = defaultdict(list)
    for key, h in zip(map(_SEAM, hops), hops):  # seams taken out in C
        by_seam[key].append(h)
    return {key: _kept_part(seam_hops) for key, seam_hops in by_seam.items()}


def _one_seam(
    key: SeamKey, kept: _Kept, folded: _Folded, num_steps: int,
    residency: list[float] | None,
) -> SeamStats:
    per_step, hops_in_step = kept.per_step, kept.hops_in_step
    if per_step.keys().isdisjoint(folded.step_bytes):
        # no folded step is a step of a kept hop (a long run's steps, most often): each
        # step's figures are its own, and only their largest are read
        step_bytes_max = max([*per_step.values(), *folded.step_bytes.values()], default=0)
        step_hops_max = max([*hops_in_step.values(), *folded.step_hops.values()], default=0)
    else:
        per_step, hops_in_step = dict(per_step), dict(hops_in_step)  # the kept part stays
        for step, b in folded.step_bytes.items():
            per_step[step] = per_step.get(step, 0) + b
        for step, k in folded.step_hops.items():
            hops_in_step[step] = hops_in_step.get(step, 0) + k
        step_bytes_max, step_hops_max = max(per_step.values()), max(hops_in_step.values())
    step_bytes_max = max(step_bytes_max, folded.block_bytes_max)
    step_hops_max = max(step_hops_max, folded.block_hops_max)
    transports = dict(kept.transports)
    for transport, k in folded.transports.items():
        transports[transport] = transports.get(transport, 0) + k
    n, total = kept.hops + folded.hops, kept.total + folded.total
    items = kept.items + folded.items
    times = list(kept.times)
    if folded.records:
        times += (folded.t_lo, folded.t_hi)
    lows = [folded.low] if folded.records else []  # folded steps' least hop
    highs = [folded.high] if folded.records else []  # ... and largest
    hop_bytes = kept.hop_bytes
    counts = Counter(kept.sizes)
    counts.update(folded.sizes)
    sizes = sorted(counts.items())
    return SeamStats(
        src=key[0],
        dst=key[1],
        name=key[2],
        hops=n,
        total_bytes=total,
        min_bytes=min(lows + ([min(hop_bytes)] if hop_bytes else [])),
        max_bytes=max(highs + ([max(hop_bytes)] if hop_bytes else [])),
        p50_bytes=weighted_percentile(sizes, 0.5),
        p90_bytes=weighted_percentile(sizes, 0.9),
        p99_bytes=weighted_percentile(sizes, 0.99),
        bytes_per_step_mean=total / num_steps,
        bytes_per_step_max=step_bytes_max,
        hops_per_step=n / num_steps,
        hops_per_step_max=step_hops_max,
        transports=dict(sorted(transports.items())),
        leaves=_leaf_stats(kept.schemas, folded.schemas),
        first_t_ns=min(times),
        last_t_ns=max(times),
        residency_mean_s=sum(residency) / len(residency) if residency else None,
        residency_max_s=max(residency) if residency else None,
        items=items,
        hop_bytes=hop_bytes,
        folded_bytes=folded.means,
    )


def _leaf_stats(kept: Sequence[tuple[tuple[Leaf, ...], int]],
                folded: Mapping[int, tuple[tuple[Leaf, ...], int, list[int]]]
                ) -> tuple[LeafStats, ...]:
    acc: dict[str, _LeafAcc] = {}
    # Kept hops: each schema once, weighted by how many hops carried it (first-seen order:
    # deterministic for a given trace).
    for leaves, n in kept:
        for leaf in leaves:
            _merge_leaf(acc, leaf, n)
    # Folded steps: each leaf once per schema, with the hops and byte shares of every step
    # that carried it (merging is order-free but for first-seen values, and schemas keep
    # their first-seen order).
    for leaves, k, shares in folded.values():
        for leaf, share in zip(leaves, shares):
            _merge_leaf(acc, leaf, k, share)
    ranked = sorted(acc.values(), key=lambda ls: (-ls.total_bytes, ls.path))
    return tuple(a.freeze() for a in ranked)


def _merge_leaf(acc: dict[str, _LeafAcc], leaf: Leaf, n: int, total: int | None = None) -> None:
    """Add `n` hops of `leaf` (`total` bytes in all; default `n` times its size)."""
    cur = acc.get(leaf.path)
    shape: Shape = tuple(leaf.shape)
    total = leaf.nbytes * n if total is None else total
    if cur is None:
        acc[leaf.path] = _LeafAcc(
            path=leaf.path,
            kind=leaf.kind,
            dtypes=[leaf.dtype] if leaf.dtype else [],
            shape=shape,
            dims=tuple(leaf.dims) if leaf.dims else None,
            total_bytes=total,
            max_bytes=leaf.nbytes,
            hops=n,
            ranks=(len(shape), len(shape)),
        )
        return
    cur.total_bytes += total
    cur.max_bytes = max(cur.max_bytes, leaf.nbytes)
    cur.hops += n
    if leaf.dtype and leaf.dtype not in cur.dtypes:
        cur.dtypes = sorted(cur.dtypes + [leaf.dtype])
    if leaf.kind != cur.kind:
        cur.kind = "mixed"
    cur.shape = _shape_range(cur.shape, shape)
    cur.ranks = (min(cur.ranks[0], len(shape)), max(cur.ranks[1], len(shape)))
    if cur.dims is None and leaf.dims:
        cur.dims = tuple(leaf.dims)


def _span(d: Dim) -> tuple[int, int]:
    return (d, d) if isinstance(d, int) else d


def _shape_range(a: Shape, b: Shape) -> Shape:
    if a == b:
        return a
    if len(a) != len(b):
        return ()
    out: list[Dim] = []
    for x, y in zip(a, b):
        (lx, hx), (ly, hy) = _span(x), _span(y)
        lo, hi = min(lx, ly), max(hx, hy)
        out.append(lo if lo == hi else (lo, hi))
    return tuple(out)


def _residency(run: HopSource) -> dict[SeamKey, list[float]]:
    """Seconds each item stayed at a seam's destination before leaving it (or being dropped)."""
    arrivals: dict[tuple[ItemId, str], tuple[SeamKey, int]] = {}
    out: dict[SeamKey, list[float]] = defaultdict(list)
    events: list[tuple[int, int, Hop | Drop]] = [
        (h.t_ns, 0, h) for h in compress(run.hops, map(_ITEMS, run.hops))]
    events += [(d.t_ns, 1, d) for d in run.drops if d.items]
    events.sort(key=lambda e: (e[0], e[1]))
    for t, _, ev in events:
        if isinstance(ev, Hop):
            for item in ev.items:
                arrived = arrivals.pop((item, ev.src), None)
                if arrived is not None:
                    out[arrived[0]].append((t - arrived[1]) / 1e9)
                arrivals[(item, ev.dst)] = ((ev.src, ev.dst, ev.name), t)
        else:
            for item in ev.items:
                arrived = arrivals.pop((item, ev.owner), None)
                if arrived is not None:
                    out[arrived[0]].append((t - arrived[1]) / 1e9)
    return out


@dataclass(slots=True)
class _Flow:
    bytes_in: int = 0
    bytes_out: int = 0
    hops_in: int = 0
    hops_out: int = 0


def owner_stats(run: Records, seams: Mapping[SeamKey, SeamStats]) -> dict[str, OwnerStats]:
    """`name -> OwnerStats`, sorted by name: what flows in and out of each, by `seams`, and
    the processes it ran in (`flowmap.model.processes`)."""
    flows: dict[str, _Flow] = {}
    pids: dict[str, set[int]] = defaultdict(set)
    for s in seams.values():
        src, dst = flows.setdefault(s.src, _Flow()), flows.setdefault(s.dst, _Flow())
        src.bytes_out += s.total_bytes
        src.hops_out += s.hops
        dst.bytes_in += s.total_bytes
        dst.hops_in += s.hops
    into: dict[str, set[int]] = defaultdict(set)  # processes that recorded hops to an owner
    for h in run.hops:
        pids[h.src].add(h.pid)
        into[h.dst].add(h.pid)
    for st in run.seam_steps:
        pids[st.src].add(st.pid)
    counted: list[CounterSample | CounterFold] = [*run.counter_samples, *run.counter_folds]
    for c in counted:
        if c.owner:
            flows.setdefault(c.owner, _Flow())
            pids[c.owner].add(c.pid)
    placed = place_owners(run.shards, flows, pids, into)
    return {
        name: OwnerStats(name, role_of(name), f.bytes_in, f.bytes_out, f.hops_in, f.hops_out,
                         tuple(sorted(placed[name])), hosts_of(placed[name], run.shards))
        for name, f in sorted(flows.items())
    }


def counter_stats(run: Records) -> dict[str, CounterStats]:
    """`name -> CounterStats`, sorted by name.

    A fold (`trace --aggregate`) adds its count, sum, least and largest value
    as its samples would, and its last value where it ends latest; it is one
    point of the series: its mean at its last sample's time.
    """
    # name -> [(t_ns, count, sum, min, max, last)], samples being folds of one
    parts: dict[str, list[tuple[int, int, float, float, float, float]]] = defaultdict(list)
    owners: dict[str, set[str]] = defaultdict(set)
    for c in run.counter_samples:
        v = c.value
        parts[c.name].append((c.t_ns, 1, v, v, v, v))
        if c.owner:
            owners[c.name].add(c.owner)
    for f in run.counter_folds:
        parts[f.name].append((f.t_ns, f.count, f.total, f.min, f.max, f.last))
        if f.owner:
            owners[f.name].add(f.owner)
    out: dict[str, CounterStats] = {}
    for name in sorted(parts):
        got = parts[name]
        if run.counter_folds:
            got.sort(key=lambda p: p[0])  # samples and folds come in time order
        count = sum(p[1] for p in got)
        out[name] = CounterStats(
            name=name,
            count=count,
            min=min(p[3] for p in got),
            max=max(p[4] for p in got),
            mean=sum(p[2] for p in got) / count,
            last=got[-1][5],
            series=tuple(((t - run.t0_ns) / 1e9, total / n) for t, n, total, _, _, _ in got),
            owners=tuple(sorted(owners[name])),
        )
    return out


@dataclass(slots=True)
class _Life:
    born_s: float
    end_s: float
    dropped: str | None
    events: list[ItemEvent]


def item_stats(run: Records) -> ItemStats:
    """Totals, drops by reason, and each item's life."""
    lives: dict[ItemId, _Life] = {}
    for h in compress(run.hops, map(_ITEMS, run.hops)):  # those that carry items
        t = (h.t_ns - run.t0_ns) / 1e9
        for item in h.items:
            life = lives.get(item)
            if life is None:
                life = lives[item] = _Life(t, t, None, [])
            life.events.append((t, h.src, "leave"))
            life.events.append((t, h.dst, "arrive"))
            life.end_s = t
    dropped: Counter[str] = Counter()
    for d in run.drops:
        t = (d.t_ns - run.t0_ns) / 1e9
        for item in d.items:
            life = lives.get(item)
            if life is None:
                life = lives[item] = _Life(t, t, None, [])
            if life.dropped is None:
                dropped[d.reason] += 1
            life.dropped = d.reason
            life.events.append((t, d.owner, "drop"))
            life.end_s = max(life.end_s, t)
    total = len(lives)
    return ItemStats(
        total=total,
        consumed=total - sum(dropped.values()),
        dropped=dict(sorted(dropped.items())),
        lives={k: ItemLife(k, v.born_s, v.end_s, v.dropped, tuple(v.events)) for k, v in lives.items()},
    )
