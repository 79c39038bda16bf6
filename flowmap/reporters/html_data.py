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
from collections.abc import Callable, Sequence
from typing import Any

from flowmap.findings import Finding, findings
from flowmap.model.flow import UNNAMED_DRIVER, Flow, FlowEdge, star_center
from flowmap.model.format import fmt_per_step
from flowmap.model.json_forms import leaf_dict
from flowmap.model.types import LeafStats, Node, SeamStats, StepBin, StepBins
from flowmap.model.view import RunView
from flowmap.reporters.fit import fitted, memo, min_zoom
from flowmap.reporters.layout import layout_graph
from flowmap.reporters.layout_records import (
    EdgeRoute,
    EdgeSpec,
    Layout,
    NodeSpec,
    text_width_px,
)

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
#: Label sizes in layout pixels. The page opens at no less than 1:1 (`flowmap.js`,
#: LEGIBLE_PX), so at any window size every label it shows is at least 11 CSS px.
NODE_FONT_PX = 12
EDGE_FONT_PX = 11
#: Longer names are cut on the graph (the full text is the hover title and the side panel):
#: one 60-character payload name would otherwise widen every layer it crosses.
MAX_NODE_LABEL_CHARS = 24
MAX_EDGE_LABEL_CHARS = 18
NODE_HEIGHT_PX = 30


Place = Callable[[list[NodeSpec], list[EdgeSpec], str], Layout]


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
        placed, scale = fitted(lambda k, eng: _layout(names, seams, owner_id, eng, place, k), engine)
    else:  # the flow places the owners; the driver stands apart, its seams not drawn
        placed, scale = fitted(
            lambda k, eng: _flow_layout(names, seams, flow, driver, owner_id, eng, place, k),
            "layered" if engine == "auto" else engine)
    binned = view.step_bins(min(MAX_STEP_BINS, BIN_BUDGET // max(1, len(seams))))
    extra = {} if flow is None else {"flow": _flow(view, flow, driver, owner_id, placed)}
    # a seam between two stages a black arrow already joins is not drawn again, faint
    covered = set() if flow is None else {
        p for _, e in _drawn_flow(flow, driver, owner_id) for p in ((e.src, e.dst), (e.dst, e.src))}
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
        "duration_s": _num(view.duration_s),
        "wall_s": _num(view.wall_s),
        "exit_code": view.ending.exit_code,
        "ended": view.ending.sentence,
        "failed": view.ending.failed,
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
        },
        "layout": {"engine": placed.engine, "width": placed.width, "height": placed.height,
                   "min_k": min_zoom(scale)},
    }


def _layout(owners: list[str], seams: list[SeamStats], owner_id: dict[str, str],
            engine: str, place: Place = layout_graph, scale: float = 1.0) -> Layout:
    nodes = [NodeSpec(owner_id[name], _node_width(name) * scale, NODE_HEIGHT_PX * scale)
             for name in owners]
    edges = [
        EdgeSpec(f"s{i}", owner_id[s.src], owner_id[s.dst], _label_width(s.name), 2)
        for i, s in enumerate(seams)
    ]
    return place(nodes, edges, engine)


def flow_driver(view: RunView) -> str | None:
    """The owner that calls every stage and hands their data on: the unnamed `main` of a
    script's seams, or the centre of a star of seams. Drawn as one node, its seams unrouted."""
    owners = {n.name for n in view.pipeline.nodes}
    if UNNAMED_DRIVER in owners:
        return UNNAMED_DRIVER
    centre = star_center(view.seams)
    return centre if centre in owners else None


def _drawn_flow(flow: Flow, driver: str | None, owner_id: dict[str, str]
                ) -> list[tuple[int, FlowEdge]]:
    """The flow edges the graph draws: between two stages, neither of them the driver (what the
    driver made or got back is in the seam table and in the driver's summary)."""
    return [(i, e) for i, e in enumerate(flow.edges)
            if e.src in owner_id and e.dst in owner_id and driver not in (e.src, e.dst)]


def _flow_layout(owners: list[str], seams: list[SeamStats], flow: Flow, driver: str | None,
                 owner_id: dict[str, str], engine: str, place: Place = layout_graph,
                 scale: float = 1.0) -> Layout:
    """Owners placed by the flow's producer -> consumer edges, in the flow's order; a seam
    between two stages a straight line; the driver's seams are not routed (a star)."""
    rank = {name: k for k, name in enumerate(flow.stages)}
    ordered = sorted(owners, key=lambda n: (n != driver, rank.get(n, len(rank))))
    nodes = [NodeSpec(owner_id[name], _node_width(name, name == driver) * scale, NODE_HEIGHT_PX * scale)
             for name in ordered]
    edges = [EdgeSpec(f"f{i}", owner_id[e.src], owner_id[e.dst], _label_width(_flow_name(e)), 2,
                      rank[e.dst] <= rank[e.src])  # data going back up the flow: drawn against it
             for i, e in _drawn_flow(flow, driver, owner_id)]
    kept = place(nodes, edges, engine)  # kept by the memo: the seams' lines go on a copy
    placed = Layout(kept.engine, kept.width, kept.height, dict(kept.nodes), dict(kept.edges))
    for i, s in enumerate(seams):
        (x0, y0), (x1, y1) = placed.nodes[owner_id[s.src]], placed.nodes[owner_id[s.dst]]
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        placed.edges[f"s{i}"] = EdgeRoute([(x0, y0), (mx, my), (mx, my), (x1, y1)], (mx, my))
    return placed


def _flow(view: RunView, flow: Flow, driver: str | None, owner_id: dict[str, str],
          placed: Layout) -> dict[str, Any]:
    steps = view.num_steps
    edges = []
    for i, e in _drawn_flow(flow, driver, owner_id):
        route = placed.edges[f"f{i}"]
        calls = ", ".join(e.names)
        edges.append({
            "id": f"f{i}", "src": owner_id[e.src], "dst": owner_id[e.dst],
            "short": short_label(_flow_name(e), MAX_EDGE_LABEL_CHARS),
            "label": f"{e.src} feeds {e.dst} ({_flow_name(e)}) in {calls}: {e.hops} hops",
            "bytes": e.nbytes, "bytes_per_step": _num(e.nbytes / steps), "hops": e.hops,
            "figure": fmt_per_step(e.nbytes / steps, view.has_steps),
            "back": _upwards(route.points),
            "path": [c for p in route.points for c in p], "label_at": list(route.label),
        })
    out: dict[str, Any] = {"stages": list(flow.stages), "order": flow.order_text(), "edges": edges}
    if driver is not None:
        out["driver"] = owner_id[driver]
    return out


def _flow_name(e: FlowEdge) -> str:
    """What the consumer calls the data (`sequences`), else the payload's name."""
    return ", ".join(e.args or e.names)


def _upwards(points: list[tuple[float, float]]) -> bool:
    """An edge drawn against the top-down flow: it closes a cycle (weight sync -> rollout)."""
    return points[-1][1] < points[0][1] - 1.0


def short_label(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the cut marked by an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _node_width(name: str, driver: bool = False) -> float:
    return max(64.0, text_width_px(_node_label(name, driver), NODE_FONT_PX) + 24.0)


def _node_label(name: str, driver: bool = False) -> str:
    return short_label(name, MAX_NODE_LABEL_CHARS) + (" (driver)" if driver else "")


def _label_width(name: str) -> float:
    # The page draws two lines, the payload name over "123 KiB/step"; room for the widest figure.
    shown = short_label(name, MAX_EDGE_LABEL_CHARS)
    return text_width_px(max(shown, "999 KiB/step", key=len), EDGE_FONT_PX)


def _owner(n: Node, oid: str, placed: Layout, scale: float = 1.0, driver: bool = False
           ) -> dict[str, Any]:
    x, y = placed.nodes[oid]
    return {
        "id": oid,
        **({"driver": True} if driver else {}),
        "name": n.name,
        "short": _node_label(n.name, driver),
        "role": n.role,
        "bytes_in": n.bytes_in,
        "bytes_out": n.bytes_out,
        "hops_in": n.hops_in,
        "hops_out": n.hops_out,
        "pids": list(n.pids),
        "resident": [[_num(t, 6), c] for t, c in n.resident],
        "resident_max": n.resident_max,
        "x": x,
        "y": y,
        "w": round(_node_width(n.name, driver) * scale, 1),
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
        "back": _upwards(route.points),
        "hops": s.hops,
        "total_bytes": s.total_bytes,
        "max_bytes": s.max_bytes,
        "p50_bytes": s.p50_bytes,
        "p90_bytes": s.p90_bytes,
        "bytes_per_step": _num(s.bytes_per_step_mean),
        "bytes_per_step_max": s.bytes_per_step_max,
        "transports": dict(s.transports),
        "items": s.items,
        "residency_mean_s": _num(s.residency_mean_s),
        "residency_max_s": _num(s.residency_max_s),
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
    return [b.first_step, b.last_step, b.num_steps, _num(b.t0_s, 6), _num(b.t1_s, 6)]


def _counters(view: RunView) -> list[dict[str, Any]]:
    counters = list(view.counters.values())
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
            "owners": list(c.owners),
            "t": [_num(t, 6) for t, _ in series],
            "v": [_num(v) for _, v in series],
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
            "bytes_per_step": _num(f.bytes_per_step),
            "bytes_per_step_text": fmt_per_step(f.bytes_per_step, stepped),  # as its message says
            "message": f.message,
        }
        for f in found[:MAX_FINDINGS]
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
