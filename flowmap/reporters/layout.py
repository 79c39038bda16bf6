"""Place owners and route seams for the HTML graph: Graphviz `dot` when present, else our own.

The HTML must look the same whether or not Graphviz is installed, so both
engines return one `Layout` (`flowmap.reporters.layout_records`). Names from user code never reach `dot`: nodes and
edges go in under generated ids, and edge labels as placeholders of the
same length, so nothing needs quoting and nothing can be injected.

The built-in engine, a small Sugiyama layered layout, is `flowmap.reporters.layered`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from flowmap.errors import UsageError
from flowmap.reporters import layout_records
from flowmap.reporters.layered import layered
from flowmap.reporters.layout_records import EdgeSpec, Layout, NodeSpec, Point

#: `dot` gets this long before we fall back to the built-in engine.
DOT_TIMEOUT_S = 20.0
#: Beyond this many nodes + edges, `dot` can take minutes; use the built-in engine.
DOT_MAX_ELEMENTS = 4000

ENGINES = ("auto", "dot", "layered")


def layout_graph(nodes: list[NodeSpec], edges: list[EdgeSpec], engine: str = "auto") -> Layout:
    """Lay the graph out with `engine`: "dot", "layered", or "auto" (dot when it works)."""
    if engine not in ENGINES:
        raise UsageError(f"layout must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine in ("auto", "dot") and dot_available() and len(nodes) + len(edges) <= DOT_MAX_ELEMENTS:
        placed = _dot(nodes, [e for e in edges if not e.order_only])  # dot orders by its own edges
        if placed is not None:
            return placed
    return layered(nodes, edges)


def dot_available() -> bool:
    return shutil.which("dot") is not None


# --- Graphviz -------------------------------------------------------------------------


def _dot(nodes: list[NodeSpec], edges: list[EdgeSpec]) -> Layout | None:
    """Positions from `dot -Tjson0`; None when dot fails, so the caller falls back."""
    index = {n.id: i for i, n in enumerate(nodes)}
    lines = [
        "digraph G {",
        f"graph [rankdir=TB, nodesep={layout_records.NODE_GAP_PX / 72:.3f}, "
        f"ranksep={layout_records.RANK_GAP_PX / 72:.3f}];",
        'node [shape=box, fixedsize=true, label=""];',
        'edge [fontname="Helvetica", fontsize=10];',
    ]
    lines += [f"n{i} [width={n.width / 72:.4f}, height={n.height / 72:.4f}];" for i, n in enumerate(nodes)]
    for i, e in enumerate(edges):
        # A placeholder of the label's length reserves its room; the real text stays out of dot.
        line = "n" * min(2000, max(1, round(e.label_width / 6.2)))  # dot takes <= 16 KB strings
        label = "\\n".join([line] * min(e.label_lines, 7)) if e.label_width else ""
        lines.append(f'n{index[e.src]} -> n{index[e.dst]} [id="e{i}", label="{label}"];')
    lines.append("}")
    try:
        proc = subprocess.run(
            ["dot", "-Tjson0"], input="\n".join(lines), capture_output=True, text=True,
            timeout=DOT_TIMEOUT_S, check=False,
        )
        doc = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    try:
        return _read_dot(doc, nodes, edges)
    except (KeyError, ValueError, IndexError, TypeError):
        return None


def _read_dot(doc: dict[str, Any], nodes: list[NodeSpec], edges: list[EdgeSpec]) -> Layout:
    _, _, width, height = (float(v) for v in doc["bb"].split(","))
    pad = 8.0

    def flip(x: float, y: float) -> Point:  # dot's y grows upwards
        return (round(x + pad, 1), round(height - y + pad, 1))

    out = Layout("dot", round(width + 2 * pad, 1), round(height + 2 * pad, 1))
    for obj in doc.get("objects", []):
        i = int(obj["name"][1:])
        x, y = (float(v) for v in obj["pos"].split(","))
        out.nodes[nodes[i].id] = flip(x, y)
    for e in doc.get("edges", []):
        spec = edges[int(e["id"][1:])]
        points, tip = _dot_spline(e["pos"])
        route = [flip(*p) for p in points]
        if tip is not None:  # a straight last segment up to the arrow tip
            end = flip(*tip)
            route += [route[-1], end, end]
        if "lp" in e:
            label = flip(*(float(v) for v in e["lp"].split(",")))
        else:
            label = route[len(route) // 2]
        out.edges[spec.id] = layout_records.EdgeRoute(route, label)
    return out


def _dot_spline(pos: str) -> tuple[list[Point], Point | None]:
    """`"e,x,y [s,x,y] x,y x,y ..."` -> (Bezier points, arrow tip)."""
    points: list[Point] = []
    tip: Point | None = None
    for token in pos.split():
        parts = token.split(",")
        if parts[0] == "e":
            tip = (float(parts[1]), float(parts[2]))
        elif parts[0] != "s":
            points.append((float(parts[0]), float(parts[1])))
    return points, tip
