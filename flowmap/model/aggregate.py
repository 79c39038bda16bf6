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
from operator import attrgetter
from typing import TYPE_CHECKING, Protocol

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

__all__ = ["HopSource", "counter_stats", "item_stats", "owner_stats", "percentile", "role_of",
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


def seam_stats(run: HopSource) -> dict[SeamKey, SeamStats]:
    """`(src, dst, name) -> SeamStats`, heaviest first (ties by key, for determinism)."""
    by_seam: dict[SeamKey, list[Hop]] = defaultdict(list)
    for h in run.hops:
        by_seam[(h.src, h.dst, h.name)].append(h)
    folded: dict[SeamKey, list[SeamStep]] = defaultdict(list)
    for st in run.seam_steps:
        folded[(st.src, st.dst, st.name)].append(st)
    residency = _residency(run)
    keys = list(by_seam) + [k for k in folded if k not in by_seam]
    out = [_one_seam(key, by_seam.get(key, []), folded.get(key, []), run.num_steps,
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


def _one_seam(
    key: SeamKey, hops: list[Hop], folded: list[SeamStep], num_steps: int,
    residency: list[float] | None,
) -> SeamStats:
    hop_bytes = [h.nbytes for h in hops]
    steps = [h.step for h in hops]
    # Counted in C where one can be (this runs once per kept hop, at every live update);
    # only the values of these dicts are read.
    hops_in_step: dict[int | None, int] = Counter(steps)
    transports: dict[str, int] = Counter(map(_TRANSPORT, hops))
    items = sum(map(len, map(_ITEMS, hops)))
    per_step: dict[int | None, int] = {}
    if len(hops_in_step) == 1:
        per_step[steps[0]] = sum(hop_bytes)
    else:
        for step, b in zip(steps, hop_bytes):
            per_step[step] = per_step.get(step, 0) + b
    # Folded steps: fields taken out in C, one short loop (this runs once per seam-step, at
    # every live update).
    ks = list(map(_HOPS, folded))
    bs = list(map(_NBYTES_SUM, folded))
    steps_folded = list(map(_STEP, folded))
    if len(set(steps_folded)) == len(steps_folded) and per_step.keys().isdisjoint(steps_folded):
        # one record per step, none a step of a kept hop (a long run's steps, most often):
        # each step's figures are its record's, and only their largest are read
        step_bytes_max = max([*per_step.values(), *bs])
        step_hops_max = max([*hops_in_step.values(), *ks])
    else:
        for step, k, b in zip(steps_folded, ks, bs):
            per_step[step] = per_step.get(step, 0) + b
            hops_in_step[step] = hops_in_step.get(step, 0) + k
        step_bytes_max, step_hops_max = max(per_step.values()), max(hops_in_step.values())
    kinds = set(map(_TRANSPORT, folded))
    if len(kinds) == 1:
        (transport,) = kinds
        transports[transport] = transports.get(transport, 0) + sum(ks)
    else:
        for transport, k in zip(map(_TRANSPORT, folded), ks):
            transports[transport] = transports.get(transport, 0) + k
    items += sum(map(_NUM_ITEMS, folded))
    means = [(b // k, k) for b, k in zip(bs, ks) if k]
    n, total = len(hops) + sum(ks), sum(hop_bytes) + sum(bs)
    times = [h.t_ns for h in hops[:1] + hops[-1:]]
    if folded:
        times += (min(map(_T_FIRST, folded)), max(map(_T_FIRST, folded)),
                  min(map(_T_NS, folded)), max(map(_T_NS, folded)))
    lows = [min(map(_NBYTES_MIN, folded))] if folded else []  # folded steps' least hop
    highs = [max(map(_NBYTES_MAX, folded))] if folded else []  # ... and largest
    counts = Counter(hop_bytes)
    for mean, k in means:
        counts[mean] += k
    sizes = sorted(counts.items())
    return SeamStats(
        src=key[0],
        dst=key[1],
        name=key[2],
        hops=n,
        total_bytes=total,
        min_bytes=min(lows + ([min(hop_bytes)] if hops else [])),
        max_bytes=max(highs + ([max(hop_bytes)] if hops else [])),
        p50_bytes=weighted_percentile(sizes, 0.5),
        p90_bytes=weighted_percentile(sizes, 0.9),
        p99_bytes=weighted_percentile(sizes, 0.99),
        bytes_per_step_mean=total / num_steps,
        bytes_per_step_max=step_bytes_max,
        hops_per_step=n / num_steps,
        hops_per_step_max=step_hops_max,
        transports=dict(sorted(transports.items())),
        leaves=_leaf_stats(hops, folded),
        first_t_ns=min(times),
        last_t_ns=max(times),
        residency_mean_s=sum(residency) / len(residency) if residency else None,
        residency_max_s=max(residency) if residency else None,
        items=items,
        hop_bytes=tuple(hop_bytes),
        folded_bytes=tuple(means),
    )


def _leaf_stats(hops: list[Hop], folded: Sequence[SeamStep] = ()) -> tuple[LeafStats, ...]:
    acc: dict[str, _LeafAcc] = {}
    # Hops share their schema tuples (interned in the trace): merge each once,
    # weighted by how many hops carried it.
    uses = Counter(map(id, (h.leaves for h in hops)))
    schemas = {id(h.leaves): h.leaves for h in hops}
    for sid, n in uses.items():  # first-seen order: deterministic for a given trace
        for leaf in schemas[sid]:
            _merge_leaf(acc, leaf, n)
    # A folded step's schema holds each leaf's largest size: its bytes are shared among
    # the leaves in that proportion, so leaf totals add up to the seam's (exact where sizes
    # were steady within the step). Steps share their schema tuples too: each leaf is
    # merged once per schema, with the hops and shares of every step that carried it
    # (merging is order-free but for first-seen values, and schemas keep their first-seen
    # order).
    by_schema: dict[int, tuple[tuple[Leaf, ...], list[int], list[int]]] = {}
    schemas_of = list(map(_LEAVES, folded))
    if len(set(map(id, schemas_of))) == 1:  # one schema (most seams): no grouping
        by_schema[id(schemas_of[0])] = (schemas_of[0], list(map(_HOPS, folded)),
                                        list(map(_NBYTES_SUM, folded)))
    else:
        for leaves, k, b in zip(schemas_of, map(_HOPS, folded), map(_NBYTES_SUM, folded)):
            got = by_schema.get(id(leaves))
            if got is None:
                got = by_schema[id(leaves)] = (leaves, [], [])
            got[1].append(k)
            got[2].append(b)
    for leaves, ks, bs in by_schema.values():
        largest = sum(leaf.nbytes for leaf in leaves)
        for leaf in leaves:
            share = sum([round(b * leaf.nbytes / largest) for b in bs]) if largest else 0
            _merge_leaf(acc, leaf, sum(ks), share)
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
    events: list[tuple[int, int, Hop | Drop]] = [(h.t_ns, 0, h) for h in run.hops if h.items]
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
    """`name -> OwnerStats`, sorted by name: what flows in and out of each, by `seams`."""
    flows: dict[str, _Flow] = {}
    pids: dict[str, set[int]] = defaultdict(set)
    for s in seams.values():
        src, dst = flows.setdefault(s.src, _Flow()), flows.setdefault(s.dst, _Flow())
        src.bytes_out += s.total_bytes
        src.hops_out += s.hops
        dst.bytes_in += s.total_bytes
        dst.hops_in += s.hops
    for h in run.hops:
        pids[h.src].add(h.pid)
    for st in run.seam_steps:
        pids[st.src].add(st.pid)
    counted: list[CounterSample | CounterFold] = [*run.counter_samples, *run.counter_folds]
    for c in counted:
        if c.owner:
            flows.setdefault(c.owner, _Flow())
            pids[c.owner].add(c.pid)
    return {
        name: OwnerStats(name, role_of(name), f.bytes_in, f.bytes_out, f.hops_in, f.hops_out,
                         tuple(sorted(pids.get(name, ()))))
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
    for h in run.hops:
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
