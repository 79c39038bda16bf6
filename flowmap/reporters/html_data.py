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
from collections.abc import Sequence
from typing import Any

from flowmap.findings import Finding, findings
from flowmap.model.format import fmt_per_step
from flowmap.model.json_forms import leaf_dict
from flowmap.model.types import LeafStats, Node, SeamStats, StepBin, StepBins
from flowmap.model.view import RunView
from flowmap.reporters.fit import filled, fitted, memo, min_zoom
from flowmap.reporters.html_flow import covered_pairs, flow_data, flow_driver, flow_layout
from flowmap.reporters.html_sizes import (
    MAX_EDGE_LABEL_CHARS,
    NODE_HEIGHT_PX,
    Place,
    label_width,
    node_label,
    node_width,
    num,
    short_label,
    upwards,
)
from flowmap.reporters.layout import layout_graph
from flowmap.reporters.layout_records import EdgeSpec, Layout, NodeSpec

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


def html_document(view: RunView, engine: str = "auto", place: Place = layout_graph,
                  found: Sequence[Finding] | None = None) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready plain data. `place` lays the graph out, and
    `found` are the view's findings if already found (the live page passes a layout that
    stays while the graph is unchanged, and the findings its watch keeps)."""
    # Owners in pipeline order, seams heaviest first: ids are stable per run.
    nodes = view.pipeline.nodes
    seams = list(view.seams.values())
    owner_id = {n.name: f"o{i}" for i, n in enumerate(nodes)}
    seam_id = {s.key: f"s{i}" for i, s in enumerate(seams)}
    flow = view.flow if view.draws_flow else None
    driver = None if flow is None else flow_driver(view)
    names = [n.name for n in nodes]
    place = memo.place(place)
    if flow is None:
        placed, scale = fitted(lambda k, eng: _layout(names, seams, owner_id, eng, place, k), engine,
                               len(names) + len(seams))
    else:  # the flow places the owners; the driver stands apart, its seams not drawn
        placed, scale = fitted(
            lambda k, eng: flow_layout(names, seams, flow, driver, owner_id, eng, place, k),
            "layered" if engine == "auto" else engine, len(names) + len(flow.edges))
    placed = filled(placed, NODE_HEIGHT_PX * scale, min_zoom(scale))
    binned = view.step_bins(min(MAX_STEP_BINS, BIN_BUDGET // max(1, len(seams))))
    extra = {} if flow is None else {"flow": flow_data(view, flow, driver, owner_id, placed, seam_id)}
    # a seam between two stages a black arrow already joins is not drawn again, faint
    covered = set() if flow is None else covered_pairs(flow, driver, owner_id)
    return {
        "flowmap": "html",
        "schema": HTML_SCHEMA,
        **extra,
        "run": _run_info(view, placed, scale),
        "owners": [_owner(n, owner_id[n.name], placed, scale, n.name == driver) for n in nodes],
        "seams": [_seam(s, seam_id[s.key], owner_id, placed, binned, driver, covered) for s in seams],
        "bins": [_bin(b) for b in binned.bins],
        "counters": _counters(view),
        "charts": chart_groups(list(view.counters)),
        "findings": _findings(findings(view) if found is None else found,
                              {s.label: seam_id[s.key] for s in seams}, view.has_steps),
    }


def _run_info(view: RunView, placed: Layout, scale: float = 1.0) -> dict[str, Any]:
    items, health = view.items, view.health
    return {
        "path": view.path,
        "hops": view.num_hops,
        "steps": view.step_count,  # 0: no steps, and the page says its figures are totals
        "first_step": view.steps[0] if view.steps else None,
        "last_step": view.steps[-1] if view.steps else None,
        "duration_s": num(view.duration_s),
        "wall_s": num(view.wall_s),
        "exit_code": view.ending.exit_code,
        "ended": view.ending.sentence,
        "failed": view.ending.failed,
        **({"watched": " → ".join(view.watched_stages)}
           if view.watched_stages and not view.num_hops else {}),
        "truncated": view.truncated,
        "projection": view.projection.note if view.projection else None,
        **({"detail": view.detail.note} if view.detail.folded else {}),
        "total_bytes": view.totals.total_bytes,
        "items": {
            "total": items.total,
            "consumed": items.consumed,
            "dropped": items.dropped_total,
            "dropped_by_reason": dict(items.dropped),
        },
        "health": {
            "shards": health.shards,
            "tracer_errors": health.tracer_errors,
            "truncated_shards": list(health.truncated_shards),
            "bad_lines": health.bad_lines,
            "hosts": list(health.hosts),
        },
        "layout": {"engine": placed.engine, "width": placed.width, "height": placed.height,
                   "min_k": min_zoom(scale)},
    }


def _layout(owners: list[str], seams: list[SeamStats], owner_id: dict[str, str],
            engine: str, place: Place = layout_graph, scale: float = 1.0) -> Layout:
    nodes = [NodeSpec(owner_id[name], node_width(name) * scale, NODE_HEIGHT_PX * scale)
             for name in owners]
    edges = [
        EdgeSpec(f"s{i}", owner_id[s.src], owner_id[s.dst], label_width(s.name), 2)
        for i, s in enumerate(seams)
    ]
    return place(nodes, edges, engine)


def _owner(n: Node, oid: str, placed: Layout, scale: float = 1.0, driver: bool = False
           ) -> dict[str, Any]:
    x, y = placed.nodes[oid]
    return {
        "id": oid,
        **({"driver": True} if driver else {}),
        "name": n.name,
        "short": node_label(n.name, driver),
        "role": n.role,
        "bytes_in": n.bytes_in,
        "bytes_out": n.bytes_out,
        "hops_in": n.hops_in,
        "hops_out": n.hops_out,
        "pids": list(n.pids),
        "hosts": list(n.hosts),
        "resident": [[num(t, 6), c] for t, c in n.resident],
        "resident_max": n.resident_max,
        "x": x,
        "y": y,
        "w": round(node_width(n.name, driver) * scale, 1),
        "h": round(NODE_HEIGHT_PX * scale, 1),
    }


def _seam(s: SeamStats, sid: str, owner_id: dict[str, str], placed: Layout,
          binned: StepBins, driver: str | None = None,
          covered: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset()) -> dict[str, Any]:
    route = placed.edges[sid]
    return {
        "id": sid,
        **({"driver": True} if driver in (s.src, s.dst) else {}),
        **({"undrawn": True} if (s.src, s.dst) in covered else {}),
        "src": owner_id[s.src],
        "dst": owner_id[s.dst],
        "name": s.name,
        "short": short_label(s.name, MAX_EDGE_LABEL_CHARS),
        "label": s.label,
        "back": upwards(route.points),
        "hops": s.hops,
        "total_bytes": s.total_bytes,
        "max_bytes": s.max_bytes,
        "p50_bytes": s.p50_bytes,
        "p90_bytes": s.p90_bytes,
        "bytes_per_step": num(s.bytes_per_step_mean),
        "bytes_per_step_max": s.bytes_per_step_max,
        "transports": dict(s.transports),
        "items": s.items,
        "residency_mean_s": num(s.residency_mean_s),
        "residency_max_s": num(s.residency_max_s),
        "leaves": [_leaf(leaf) for leaf in s.leaves[:MAX_LEAVES]],
        "leaves_total": len(s.leaves),
        "hist": size_histogram(s.hop_bytes, s.folded_bytes),
        "bin_bytes": list(binned.bytes[s.key]),
        "bin_hops": list(binned.hops[s.key]),
        "path": [c for p in route.points for c in p],
        "label_at": list(route.label),
    }


def _leaf(leaf: LeafStats) -> dict[str, Any]:
    d = leaf_dict(leaf)
    return {k: d[k] for k in ("path", "kind", "dtype", "shape", "dims", "bytes", "max_bytes",
                              "hops")}


def size_histogram(hop_bytes: Sequence[int],
                   folded: Sequence[tuple[int, int]] = ()) -> dict[str, Any]:
    """Hop sizes in power-of-two buckets: `counts[i]` hops of [2**(lo+i), 2**(lo+i+1)) bytes.

    Folded hops (`folded`: (mean bytes, hops) per seam and step) count at their step's mean.
    """
    by_length = Counter(map(int.bit_length, hop_bytes))  # n.bit_length() - 1 == floor(log2 n)
    for mean, n in folded:
        by_length[mean.bit_length()] += n
    zero = by_length.pop(0, 0)
    if not by_length:
        return {"lo": 0, "counts": [], "zero": zero}
    lo, hi = min(by_length), max(by_length)
    return {"lo": lo - 1, "counts": [by_length.get(k, 0) for k in range(lo, hi + 1)], "zero": zero}


def _bin(b: StepBin) -> list[Any]:
    """`[first_step, last_step, num_steps, t0_s, t1_s]`: the times shade counter charts."""
    return [b.first_step, b.last_step, b.num_steps, num(b.t0_s, 6), num(b.t1_s, 6)]


def _counters(view: RunView) -> list[dict[str, Any]]:
    counters = list(view.counters.values())
    per_counter = max(16, min(MAX_SERIES_POINTS, SERIES_POINTS_BUDGET // max(1, len(counters))))
    out = []
    for c in counters:
        series = downsample(c.series, per_counter)
        out.append({
            "name": c.name,
            "count": c.count,
            "min": num(c.min),
            "max": num(c.max),
            "mean": num(c.mean),
            "last": num(c.last),
            "owners": list(c.owners),
            "t": [num(t, 6) for t, _ in series],
            "v": [num(v) for _, v in series],
        })
    return out


def downsample(series: Sequence[tuple[float, float]], max_points: int
               ) -> list[tuple[float, float]]:
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


def _findings(found: Sequence[Finding], seam_by_label: dict[str, str],
              stepped: bool = True) -> list[dict[str, Any]]:
    return [
        {
            "kind": f.kind,
            "labels": list(f.seams),
            "seams": [seam_by_label[label] for label in f.seams if label in seam_by_label],
            "bytes_per_step": num(f.bytes_per_step),
            "bytes_per_step_text": fmt_per_step(f.bytes_per_step, stepped),  # as its message says
            "message": f.message,
        }
        for f in found[:MAX_FINDINGS]
    ]
