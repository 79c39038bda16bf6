"""Aggregate a run once: per seam, per owner, per counter, per item.

This is the one aggregation layer: the terminal report, the graph, the HTML,
`check`, `baseline` and `diff` all read these records, so a figure means the
same thing everywhere. Every output is sorted deterministically.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flowmap.model.reader import Hop, Leaf

if TYPE_CHECKING:
    from flowmap.model.run import Run

SeamKey = tuple[str, str, str]


def role_of(owner: str) -> str:
    """`rollout/0` -> `rollout`; `trainer/rank1` -> `trainer`."""
    return owner.split("/", 1)[0]


def seam_label(key: SeamKey) -> str:
    src, dst, name = key
    return f"{src} -> {dst} : {name}"


@dataclass(slots=True)
class LeafStats:
    """A leaf path of a seam's payload across all its hops."""

    path: str
    kind: str
    dtypes: list[str]
    shape: list[Any]  # per dim: an int when fixed, [min, max] when it varied
    dims: list[str] | None
    total_bytes: int
    max_bytes: int
    hops: int  # how many hops carried this leaf

    @property
    def mean_bytes(self) -> float:
        return self.total_bytes / self.hops if self.hops else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "dtype": self.dtypes[0] if len(self.dtypes) == 1 else "|".join(self.dtypes),
            "shape": self.shape,
            "dims": self.dims,
            "bytes": round(self.mean_bytes),
            "max_bytes": self.max_bytes,
            "total_bytes": self.total_bytes,
            "hops": self.hops,
        }


@dataclass(slots=True)
class SeamStats:
    src: str
    dst: str
    name: str
    hops: int
    total_bytes: int
    max_bytes: int
    p50_bytes: int
    p90_bytes: int
    bytes_per_step_mean: float
    bytes_per_step_max: int
    hops_per_step: float
    transports: dict[str, int]
    leaves: list[LeafStats]
    first_t_ns: int
    last_t_ns: int
    residency_mean_s: float | None = None
    residency_max_s: float | None = None
    items: int = 0
    hop_bytes: list[int] = field(default_factory=list, repr=False)

    @property
    def key(self) -> SeamKey:
        return (self.src, self.dst, self.name)

    @property
    def label(self) -> str:
        return seam_label(self.key)


@dataclass(slots=True)
class OwnerStats:
    name: str
    role: str
    bytes_in: int = 0
    bytes_out: int = 0
    hops_in: int = 0
    hops_out: int = 0
    pids: list[int] = field(default_factory=list)


@dataclass(slots=True)
class CounterStats:
    name: str
    count: int
    min: float
    max: float
    mean: float
    last: float
    series: list[tuple[float, float]]  # (seconds since run start, value)
    owners: list[str]


@dataclass(slots=True)
class ItemLife:
    """Where one item went: `events` are (seconds, owner, what) with what in arrive/leave/drop."""

    item: Any
    born_s: float
    end_s: float
    dropped: str | None  # the drop reason, if dropped
    events: list[tuple[float, str, str]]


@dataclass(slots=True)
class ItemStats:
    total: int
    consumed: int
    dropped: dict[str, int]  # reason -> count
    lives: dict[Any, ItemLife]

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())


def percentile(sorted_values: list[int], q: float) -> int:
    """Nearest-rank percentile of an ascending list (q in [0, 1])."""
    if not sorted_values:
        return 0
    rank = max(0, math.ceil(q * len(sorted_values)) - 1)
    return sorted_values[rank]


def seam_stats(run: Run) -> dict[SeamKey, SeamStats]:
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
    per_step: dict[Any, int] = {}
    transports: dict[str, int] = {}
    items = 0
    for h in hops:  # one pass, plain dicts: this loop runs once per hop of the run
        per_step[h.step] = per_step.get(h.step, 0) + h.nbytes
        transports[h.transport] = transports.get(h.transport, 0) + 1
        items += len(h.items)
    total = sum(sizes)
    return SeamStats(
        src=key[0],
        dst=key[1],
        name=key[2],
        hops=len(hops),
        total_bytes=total,
        max_bytes=sizes[-1],
        p50_bytes=percentile(sizes, 0.5),
        p90_bytes=percentile(sizes, 0.9),
        bytes_per_step_mean=total / num_steps,
        bytes_per_step_max=max(per_step.values()),
        hops_per_step=len(hops) / num_steps,
        transports=dict(sorted(transports.items())),
        leaves=_leaf_stats(hops),
        first_t_ns=hops[0].t_ns,
        last_t_ns=hops[-1].t_ns,
        residency_mean_s=sum(residency) / len(residency) if residency else None,
        residency_max_s=max(residency) if residency else None,
        items=items,
        hop_bytes=hop_bytes,
    )


def _leaf_stats(hops: list[Hop]) -> list[LeafStats]:
    acc: dict[str, LeafStats] = {}
    # Hops share their schema tuples (interned in the trace): merge each once,
    # weighted by how many hops carried it.
    uses = Counter(map(id, (h.leaves for h in hops)))
    schemas = {id(h.leaves): h.leaves for h in hops}
    for sid, n in uses.items():  # first-seen order: deterministic for a given trace
        for leaf in schemas[sid]:
            _merge_leaf(acc, leaf, n)
    return sorted(acc.values(), key=lambda ls: (-ls.total_bytes, ls.path))


def _merge_leaf(acc: dict[str, LeafStats], leaf: Leaf, n: int) -> None:
    cur = acc.get(leaf.path)
    shape = [list(d) if isinstance(d, tuple) else d for d in leaf.shape]
    if cur is None:
        acc[leaf.path] = LeafStats(
            path=leaf.path,
            kind=leaf.kind,
            dtypes=[leaf.dtype] if leaf.dtype else [],
            shape=shape,
            dims=list(leaf.dims) if leaf.dims else None,
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
        cur.dims = list(leaf.dims)


def _shape_range(a: list[Any], b: list[Any]) -> list[Any]:
    if a == b:
        return a
    if len(a) != len(b):
        return []
    out: list[Any] = []
    for x, y in zip(a, b):
        lx, hx = (x, x) if isinstance(x, int) else x
        ly, hy = (y, y) if isinstance(y, int) else y
        lo, hi = min(lx, ly), max(hx, hy)
        out.append(lo if lo == hi else [lo, hi])
    return out


def _residency(run: Run) -> dict[SeamKey, list[float]]:
    """Seconds each item stayed at a seam's destination before leaving it (or being dropped)."""
    arrivals: dict[tuple[Any, str], tuple[SeamKey, int]] = {}
    out: dict[SeamKey, list[float]] = defaultdict(list)
    events: list[tuple[int, int, Any]] = [(h.t_ns, 0, h) for h in run.hops if h.items]
    events += [(d.t_ns, 1, d) for d in run.drops if d.items]
    events.sort(key=lambda e: (e[0], e[1]))
    for t, kind, ev in events:
        if kind == 0:
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


def owner_stats(run: Run) -> dict[str, OwnerStats]:
    owners: dict[str, OwnerStats] = {}
    pids: dict[str, set[int]] = defaultdict(set)

    def get(name: str) -> OwnerStats:
        o = owners.get(name)
        if o is None:
            o = owners[name] = OwnerStats(name=name, role=role_of(name))
        return o

    for s in run.seams.values():
        src, dst = get(s.src), get(s.dst)
        src.bytes_out += s.total_bytes
        src.hops_out += s.hops
        dst.bytes_in += s.total_bytes
        dst.hops_in += s.hops
    for h in run.hops:
        pids[h.src].add(h.pid)
    for c in run.counter_samples:
        if c.owner:
            get(c.owner)
            pids[c.owner].add(c.pid)
    for name, o in owners.items():
        o.pids = sorted(pids.get(name, ()))
    return dict(sorted(owners.items()))


def counter_stats(run: Run) -> dict[str, CounterStats]:
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
            series=series[name],
            owners=sorted(owners[name]),
        )
    return out


def item_stats(run: Run) -> ItemStats:
    lives: dict[Any, ItemLife] = {}
    for h in run.hops:
        t = (h.t_ns - run.t0_ns) / 1e9
        for item in h.items:
            life = lives.get(item)
            if life is None:
                life = lives[item] = ItemLife(item, t, t, None, [])
            life.events.append((t, h.src, "leave"))
            life.events.append((t, h.dst, "arrive"))
            life.end_s = t
    dropped: Counter[str] = Counter()
    for d in run.drops:
        t = (d.t_ns - run.t0_ns) / 1e9
        for item in d.items:
            life = lives.get(item)
            if life is None:
                life = lives[item] = ItemLife(item, t, t, None, [])
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
        lives=lives,
    )
