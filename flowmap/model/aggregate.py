"""Aggregate a run once: per seam, per owner, per counter, per item.

This is the one aggregation layer: the terminal report, the graph, the HTML,
`check`, `baseline` and `diff` all read these records, so a figure means the
same thing everywhere. Every output is sorted deterministically.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from flowmap.model.reader import Drop, Hop, Leaf
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

if TYPE_CHECKING:
    from flowmap.model.run import Run

__all__ = ["HopSource", "counter_stats", "item_stats", "owner_stats", "percentile", "role_of",
           "seam_stats"]


class HopSource(Protocol):
    """What seam aggregation reads: a run, or a run seen at role level."""

    @property
    def hops(self) -> Sequence[Hop]: ...
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

    def freeze(self) -> LeafStats:
        return LeafStats(self.path, self.kind, tuple(self.dtypes), self.shape, self.dims,
                         self.total_bytes, self.max_bytes, self.hops)


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile of an ascending list (q in [0, 1])."""
    if not sorted_values:
        return 0
    rank = max(0, math.ceil(q * len(sorted_values)) - 1)
    return sorted_values[rank]


def seam_stats(run: HopSource) -> dict[SeamKey, SeamStats]:
    """`(src, dst, name) -> SeamStats`, heaviest first (ties by key, for determinism)."""
    by_seam: dict[SeamKey, list[Hop]] = defaultdict(list)
    for h in run.hops:
        by_seam[(h.src, h.dst, h.name)].append(h)
    residency = _residency(run)
    out = [_one_seam(key, hops, run.num_steps, residency.get(key)) for key, hops in by_seam.items()]
    out.sort(key=lambda s: (-s.total_bytes, s.key))
    return {s.key: s for s in out}


def _one_seam(
    key: SeamKey, hops: list[Hop], num_steps: int, residency: list[float] | None
) -> SeamStats:
    hop_bytes = [h.nbytes for h in hops]
    sizes = sorted(hop_bytes)
    per_step: dict[int | None, int] = {}
    hops_in_step: dict[int | None, int] = {}
    transports: dict[str, int] = {}
    items = 0
    for h in hops:  # one pass, plain dicts: this loop runs once per hop of the run
        per_step[h.step] = per_step.get(h.step, 0) + h.nbytes
        hops_in_step[h.step] = hops_in_step.get(h.step, 0) + 1
        transports[h.transport] = transports.get(h.transport, 0) + 1
        items += len(h.items)
    total = sum(sizes)
    return SeamStats(
        src=key[0],
        dst=key[1],
        name=key[2],
        hops=len(hops),
        total_bytes=total,
        min_bytes=sizes[0],
        max_bytes=sizes[-1],
        p50_bytes=percentile(sizes, 0.5),
        p90_bytes=percentile(sizes, 0.9),
        p99_bytes=percentile(sizes, 0.99),
        bytes_per_step_mean=total / num_steps,
        bytes_per_step_max=max(per_step.values()),
        hops_per_step=len(hops) / num_steps,
        hops_per_step_max=max(hops_in_step.values()),
        transports=dict(sorted(transports.items())),
        leaves=_leaf_stats(hops),
        first_t_ns=hops[0].t_ns,
        last_t_ns=hops[-1].t_ns,
        residency_mean_s=sum(residency) / len(residency) if residency else None,
        residency_max_s=max(residency) if residency else None,
        items=items,
        hop_bytes=tuple(hop_bytes),
    )


def _leaf_stats(hops: list[Hop]) -> tuple[LeafStats, ...]:
    acc: dict[str, _LeafAcc] = {}
    # Hops share their schema tuples (interned in the trace): merge each once,
    # weighted by how many hops carried it.
    uses = Counter(map(id, (h.leaves for h in hops)))
    schemas = {id(h.leaves): h.leaves for h in hops}
    for sid, n in uses.items():  # first-seen order: deterministic for a given trace
        for leaf in schemas[sid]:
            _merge_leaf(acc, leaf, n)
    ranked = sorted(acc.values(), key=lambda ls: (-ls.total_bytes, ls.path))
    return tuple(a.freeze() for a in ranked)


def _merge_leaf(acc: dict[str, _LeafAcc], leaf: Leaf, n: int) -> None:
    cur = acc.get(leaf.path)
    shape: Shape = tuple(leaf.shape)
    if cur is None:
        acc[leaf.path] = _LeafAcc(
            path=leaf.path,
            kind=leaf.kind,
            dtypes=[leaf.dtype] if leaf.dtype else [],
            shape=shape,
            dims=tuple(leaf.dims) if leaf.dims else None,
            total_bytes=leaf.nbytes * n,
            max_bytes=leaf.nbytes,
            hops=n,
        )
        return
    cur.total_bytes += leaf.nbytes * n
    cur.max_bytes = max(cur.max_bytes, leaf.nbytes)
    cur.hops += n
    if leaf.dtype and leaf.dtype not in cur.dtypes:
        cur.dtypes = sorted(cur.dtypes + [leaf.dtype])
    if leaf.kind != cur.kind:
        cur.kind = "mixed"
    cur.shape = _shape_range(cur.shape, shape)
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


def owner_stats(run: Run) -> dict[str, OwnerStats]:
    """`name -> OwnerStats`, sorted by name."""
    flows: dict[str, _Flow] = {}
    pids: dict[str, set[int]] = defaultdict(set)
    for s in run.seams.values():
        src, dst = flows.setdefault(s.src, _Flow()), flows.setdefault(s.dst, _Flow())
        src.bytes_out += s.total_bytes
        src.hops_out += s.hops
        dst.bytes_in += s.total_bytes
        dst.hops_in += s.hops
    for h in run.hops:
        pids[h.src].add(h.pid)
    for c in run.counter_samples:
        if c.owner:
            flows.setdefault(c.owner, _Flow())
            pids[c.owner].add(c.pid)
    return {
        name: OwnerStats(name, role_of(name), f.bytes_in, f.bytes_out, f.hops_in, f.hops_out,
                         tuple(sorted(pids.get(name, ()))))
        for name, f in sorted(flows.items())
    }


def counter_stats(run: Run) -> dict[str, CounterStats]:
    """`name -> CounterStats`, sorted by name."""
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    owners: dict[str, set[str]] = defaultdict(set)
    for c in run.counter_samples:
        series[c.name].append(((c.t_ns - run.t0_ns) / 1e9, c.value))
        if c.owner:
            owners[c.name].add(c.owner)
    out: dict[str, CounterStats] = {}
    for name in sorted(series):
        values = [v for _, v in series[name]]
        out[name] = CounterStats(
            name=name,
            count=len(values),
            min=min(values),
            max=max(values),
            mean=sum(values) / len(values),
            last=values[-1],
            series=tuple(series[name]),
            owners=tuple(sorted(owners[name])),
        )
    return out


@dataclass(slots=True)
class _Life:
    born_s: float
    end_s: float
    dropped: str | None
    events: list[ItemEvent]


def item_stats(run: Run) -> ItemStats:
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
