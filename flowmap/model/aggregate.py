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
from typing import TYPE_CHECKING

from flowmap.model import seam_parts
from flowmap.model.items import item_stats as item_stats  # re-exported with the others
from flowmap.model.items import residency as item_residency
from flowmap.model.leaves import leaf_stats
from flowmap.model.processes import hosts_of, place_owners
from flowmap.model.sources import HopSource
from flowmap.model.types import CounterStats, OwnerStats, SeamKey, SeamStats, role_of
from flowmap.read.events import CounterFold, CounterSample

if TYPE_CHECKING:
    from flowmap.read.records import Records

__all__ = ["HopSource", "counter_stats", "item_stats", "owner_stats", "percentile", "role_of",
           "seam_stats"]


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


_ITEMS = attrgetter("items")


def seam_stats(run: HopSource) -> dict[SeamKey, SeamStats]:
    """`(src, dst, name) -> SeamStats`, heaviest first (ties by key, for determinism)."""
    kept = seam_parts.kept_parts(run.hops)
    parts = seam_parts.folded_parts(run.seam_steps)
    residency = item_residency(run)
    keys = list(kept) + [k for k in parts if k not in kept]
    out = [_one_seam(key, kept.get(key, seam_parts.NO_KEPT),
                     parts.get(key, seam_parts.NO_FOLDED), run.num_steps,
                     residency.get(key)) for key in keys]
    out.sort(key=lambda s: (-s.total_bytes, s.key))
    return {s.key: s for s in out}


def _one_seam(
    key: SeamKey, kept: seam_parts.KeptPart, folded: seam_parts.FoldedPart, num_steps: int,
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
        leaves=leaf_stats(kept.schemas, folded.schemas),
        first_t_ns=min(times),
        last_t_ns=max(times),
        residency_mean_s=sum(residency) / len(residency) if residency else None,
        residency_max_s=max(residency) if residency else None,
        items=items,
        hop_bytes=hop_bytes,
        folded_bytes=folded.means,
    )


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
