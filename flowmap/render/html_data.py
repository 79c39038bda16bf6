"""The data the HTML page embeds: the run's aggregates, bounded, laid out, sorted.

The page must stay small however long the run (a 1,000,000-hop run fits in
2 MB), so nothing here grows with the number of hops: hops become per-seam
byte counts over at most `MAX_STEP_BINS` step bins, hop sizes become a
log2 histogram, counter series are cut to min/max pairs per bucket, and
leaf schemas are capped. Every list has a stable order and every float a
fixed precision, so the same run gives byte-identical HTML.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from flowmap.model.findings import findings
from flowmap.model.graph import build_graph
from flowmap.model.run import Run
from flowmap.render.layout import EdgeSpec, Layout, NodeSpec, layout_graph, text_width_px

HTML_SCHEMA = 1
#: The step-range filter works on at most this many bins of consecutive steps.
MAX_STEP_BINS = 200
#: seams x bins: many seams get fewer bins, so the per-step tables stay bounded.
BIN_BUDGET = 40_000
#: Leaf rows per seam (heaviest first); the page says how many more there are.
MAX_LEAVES = 100
#: Points per counter chart at most, and over all counters together.
MAX_SERIES_POINTS = 800
SERIES_POINTS_BUDGET = 60_000
MAX_FINDINGS = 50
NODE_FONT_PX = 12
EDGE_FONT_PX = 10
NODE_HEIGHT_PX = 30


def html_document(run: Run, engine: str = "auto") -> dict[str, Any]:
    """Everything the page shows, as JSON-ready plain data."""
    g = build_graph(run, expand_instances=True)
    # Owners in pipeline order, seams heaviest first: ids are stable per run.
    owners = pipeline_order(run, list(g.nodes))
    edge_of = {key: attrs for _, _, key, attrs in g.edges(keys=True, data=True)}
    seams = [edge_of[s.label] for s in run.seams.values()]
    owner_id = {name: f"o{i}" for i, name in enumerate(owners)}
    seam_id = {e["stats"].key: f"s{i}" for i, e in enumerate(seams)}
    placed = _layout(owners, seams, owner_id, engine)
    bins, bin_bytes, bin_hops = _step_bins(run, seam_id)
    return {
        "flowmap": "html",
        "schema": HTML_SCHEMA,
        "run": _run_info(run, placed),
        "owners": [_owner(name, g.nodes[name], owner_id[name], placed) for name in owners],
        "seams": [
            _seam(e, seam_id[e["stats"].key], owner_id, placed, bin_bytes, bin_hops) for e in seams
        ],
        "bins": bins,
        "counters": _counters(run),
        "charts": chart_groups(list(run.counters)),
        "findings": _findings(run, {e["label"]: seam_id[e["stats"].key] for e in seams}),
    }


def _run_info(run: Run, placed: Layout) -> dict[str, Any]:
    items, health = run.items, run.health
    t_end = max((h.t_ns for h in run.hops), default=run.t0_ns)
    return {
        "path": run.path,
        "hops": len(run.hops),
        "steps": len(run.steps),
        "first_step": run.steps[0] if run.steps else None,
        "last_step": run.steps[-1] if run.steps else None,
        "duration_s": _num((t_end - run.t0_ns) / 1e9),
        "truncated": run.truncated,
        "projection": run.projection["note"] if run.projection else None,
        "total_bytes": sum(s.total_bytes for s in run.seams.values()),
        "items": {
            "total": items.total,
            "consumed": items.consumed,
            "dropped": items.dropped_total,
            "dropped_by_reason": items.dropped,
        },
        "health": {
            "shards": health.shards,
            "tracer_errors": health.tracer_errors,
            "truncated_shards": health.truncated_shards,
            "bad_lines": health.bad_lines,
        },
        "layout": {"engine": placed.engine, "width": placed.width, "height": placed.height},
    }


def _layout(owners: list[str], seams: list[dict], owner_id: dict[str, str], engine: str) -> Layout:
    nodes = [NodeSpec(owner_id[name], _node_width(name), NODE_HEIGHT_PX) for name in owners]
    edges = [
        EdgeSpec(f"s{i}", owner_id[e["src"]], owner_id[e["dst"]], _label_width(e["name"]), 2)
        for i, e in enumerate(seams)
    ]
    return layout_graph(nodes, edges, engine)


def pipeline_order(run: Run, owners: list[str]) -> list[str]:
    """Sources first (nothing flows into them), then by first appearance, a sender before its receiver.

    Both layout engines read this order when they break cycles, so it decides
    which way the picture runs: from where the data enters, down to the trainer.
    """
    first: dict[str, tuple[int, int]] = {}
    fed: set[str] = set()
    for s in run.seams.values():
        for owner, rank in ((s.src, 0), (s.dst, 1)):
            seen = (s.first_t_ns, rank)
            if owner not in first or seen < first[owner]:
                first[owner] = seen
        if s.src != s.dst:
            fed.add(s.dst)
    never = (2**63, 2)
    return sorted(owners, key=lambda o: (o in fed, first.get(o, never), o))


def _upwards(points: list[tuple[float, float]]) -> bool:
    """An edge drawn against the top-down flow: it closes a cycle (weight sync -> rollout)."""
    return points[-1][1] < points[0][1] - 1.0


def _node_width(name: str) -> float:
    return max(64.0, text_width_px(name, NODE_FONT_PX) + 24.0)


def _label_width(name: str) -> float:
    # The page draws two lines, the payload name over "123 KiB/step"; room for the widest figure.
    return text_width_px(max(name, "999 KiB/step", key=len), EDGE_FONT_PX)


def _owner(name: str, node: dict[str, Any], oid: str, placed: Layout) -> dict[str, Any]:
    x, y = placed.nodes[oid]
    return {
        "id": oid,
        "name": name,
        "role": node["role"],
        "bytes_in": node["bytes_in"],
        "bytes_out": node["bytes_out"],
        "hops_in": node["hops_in"],
        "hops_out": node["hops_out"],
        "pids": node["pids"],
        "resident": [[_num(t, 6), c] for t, c in node.get("resident", [])],
        "resident_max": node.get("resident_max", 0),
        "x": x,
        "y": y,
        "w": _node_width(name),
        "h": NODE_HEIGHT_PX,
    }


def _seam(
    e: dict[str, Any], sid: str, owner_id: dict[str, str], placed: Layout,
    bin_bytes: dict[str, list[int]], bin_hops: dict[str, list[int]],
) -> dict[str, Any]:
    s = e["stats"]
    route = placed.edges[sid]
    return {
        "id": sid,
        "src": owner_id[s.src],
        "dst": owner_id[s.dst],
        "name": s.name,
        "label": s.label,
        "back": _upwards(route.points),
        "hops": s.hops,
        "total_bytes": s.total_bytes,
        "max_bytes": s.max_bytes,
        "p50_bytes": s.p50_bytes,
        "p90_bytes": s.p90_bytes,
        "bytes_per_step": _num(s.bytes_per_step_mean),
        "bytes_per_step_max": s.bytes_per_step_max,
        "transports": s.transports,
        "items": s.items,
        "residency_mean_s": _num(s.residency_mean_s),
        "residency_max_s": _num(s.residency_max_s),
        "leaves": [_leaf(leaf) for leaf in s.leaves[:MAX_LEAVES]],
        "leaves_total": len(s.leaves),
        "hist": size_histogram(s.hop_bytes),
        "bin_bytes": bin_bytes[sid],
        "bin_hops": bin_hops[sid],
        "path": [c for p in route.points for c in p],
        "label_at": list(route.label),
    }


def _leaf(leaf: Any) -> dict[str, Any]:
    return {
        "path": leaf.path,
        "kind": leaf.kind,
        "dtype": "|".join(leaf.dtypes),
        "shape": leaf.shape,
        "dims": leaf.dims,
        "bytes": round(leaf.mean_bytes),
        "max_bytes": leaf.max_bytes,
        "hops": leaf.hops,
    }


def size_histogram(hop_bytes: list[int]) -> dict[str, Any]:
    """Hop sizes in power-of-two buckets: `counts[i]` hops of [2**(lo+i), 2**(lo+i+1)) bytes."""
    by_length = Counter(map(int.bit_length, hop_bytes))  # n.bit_length() - 1 == floor(log2 n)
    zero = by_length.pop(0, 0)
    if not by_length:
        return {"lo": 0, "counts": [], "zero": zero}
    lo, hi = min(by_length), max(by_length)
    return {"lo": lo - 1, "counts": [by_length.get(k, 0) for k in range(lo, hi + 1)], "zero": zero}


def _step_bins(run: Run, seam_id: dict) -> tuple[list[list[Any]], dict[str, list[int]], dict[str, list[int]]]:
    """Per seam, bytes and hops in each bin of consecutive steps.

    A hop without a step belongs to the last step seen before it (in time), or
    to the first bin when none was. Bins are `[first_step, last_step, num_steps,
    t0_s, t1_s]`, the times spanning their hops, for shading counter charts.
    """
    steps = run.steps
    nbins = max(1, min(len(steps), MAX_STEP_BINS, BIN_BUDGET // max(1, len(seam_id))))
    bin_of = {st: i * nbins // len(steps) for i, st in enumerate(steps)}
    index = {key: n for n, key in enumerate(seam_id)}
    byte_rows = [[0] * nbins for _ in index]
    hop_rows = [[0] * nbins for _ in index]
    t_lo = [math.inf] * nbins
    t_hi = [-math.inf] * nbins
    cur = 0
    for h in run.hops:
        if h.step is not None:
            cur = bin_of[h.step]
        n = index[(h.src, h.dst, h.name)]
        byte_rows[n][cur] += h.nbytes
        hop_rows[n][cur] += 1
        if h.t_ns < t_lo[cur]:
            t_lo[cur] = h.t_ns
        if h.t_ns > t_hi[cur]:
            t_hi[cur] = h.t_ns
    members_of: list[list[int]] = [[] for _ in range(nbins)]
    for st in steps:
        members_of[bin_of[st]].append(st)
    bins = []
    for b, members in enumerate(members_of):
        t0 = (t_lo[b] - run.t0_ns) / 1e9 if t_lo[b] != math.inf else None
        t1 = (t_hi[b] - run.t0_ns) / 1e9 if t_hi[b] != -math.inf else None
        bins.append([
            members[0] if members else None,
            members[-1] if members else None,
            max(1, len(members)),
            _num(t0, 6),
            _num(t1, 6),
        ])
    ids = list(seam_id.values())
    return bins, dict(zip(ids, byte_rows)), dict(zip(ids, hop_rows))


def _counters(run: Run) -> list[dict[str, Any]]:
    counters = list(run.counters.values())
    per_counter = max(16, min(MAX_SERIES_POINTS, SERIES_POINTS_BUDGET // max(1, len(counters))))
    out = []
    for c in counters:
        series = downsample(c.series, per_counter)
        out.append({
            "name": c.name,
            "count": c.count,
            "min": _num(c.min),
            "max": _num(c.max),
            "mean": _num(c.mean),
            "last": _num(c.last),
            "owners": c.owners,
            "t": [_num(t, 6) for t, _ in series],
            "v": [_num(v) for _, v in series],
        })
    return out


def downsample(series: list[tuple[float, float]], max_points: int) -> list[tuple[float, float]]:
    """At most `max_points` points: each bucket keeps its min and max, in time order, so spikes survive."""
    if len(series) <= max_points:
        return list(series)
    buckets = max(1, max_points // 2)
    out: list[tuple[float, float]] = []
    n = len(series)
    for b in range(buckets):
        chunk = series[b * n // buckets:(b + 1) * n // buckets]
        if not chunk:
            continue
        finite = [p for p in chunk if math.isfinite(p[1])] or chunk
        lo = min(finite, key=lambda p: p[1])
        hi = max(finite, key=lambda p: p[1])
        out += sorted({lo, hi}, key=lambda p: p[0]) if lo != hi else [lo]
    return out


def chart_groups(names: list[str]) -> list[list[str]]:
    """Which counters share a chart: in-flight with its target watermark; the RL health ones next."""
    together = [n for n in names if re.search(r"in.?flight|watermark", n, re.IGNORECASE)]
    priority = ("ready", "stale", "reward", "loss")

    def rank(name: str) -> tuple[int, str]:
        low = name.lower()
        return (next((i for i, p in enumerate(priority) if p in low), len(priority)), name)

    rest = sorted((n for n in names if n not in together), key=rank)
    return ([together] if together else []) + [[n] for n in rest]


def _findings(run: Run, seam_by_label: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "kind": f.kind,
            "labels": list(f.seams),
            "seams": [seam_by_label[label] for label in f.seams if label in seam_by_label],
            "bytes_per_step": _num(f.bytes_per_step),
            "message": f.message,
        }
        for f in findings(run)[:MAX_FINDINGS]
    ]


def _num(v: float | int | None, digits: int = 6) -> float | int | None:
    """JSON-safe and stable: ints stay ints, floats keep `digits` significant digits, NaN/inf -> None."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v
    if not math.isfinite(v):
        return None
    if v == int(v) and abs(v) < 2**53:
        return int(v)
    return float(f"{v:.{digits}g}")
