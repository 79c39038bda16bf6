"""Graphviz DOT of a run's graph: where the bytes go, at a glance.

Edges are coloured and sized by bytes per step on a log scale (seam sizes in
one pipeline span six orders of magnitude: a 2 KB handle and a 16 GB replay
payload must both stay visible) and labelled with the payload name and its
bytes per step. Edges that close a cycle (the RL loop weight_sync -> rollout)
are dashed and laid out with `constraint=false`, so the loop is drawn without
folding the pipeline back on itself.

Every name in the output came from user code: all of it goes through
`quote`, which keeps it text (quotes, backslashes, newlines, and `<`, `>`,
`&` as entities, so the DOT file itself holds no markup either), and is cut
to a length Graphviz accepts: labels to `MAX_LABEL` characters, tooltips to
`MAX_TOOLTIP` (the full names stay in the JSON and HTML outputs).
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

import networkx as nx

from flowmap.units import fmt_bytes

# Light to heavy: blues for the cheap seams, reds for the ones to fix.
PALETTE = ("#9ecae1", "#6baed6", "#3182bd", "#fd8d3c", "#e6550d", "#a50f15")
ZERO_COLOR = "#bdbdbd"
MIN_PENWIDTH = 1.0
MAX_PENWIDTH = 8.0
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _escape(text: str) -> str:
    """The inside of a DOT string that Graphviz shows as exactly `text`."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = (text.replace("\\", "\\\\").replace('"', '\\"')
            .replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
    return text.replace("\n", "\\n")


MAX_LABEL = 60  # characters of a name shown in a label; the full name is in the tooltip
MAX_TOOLTIP = 2000  # characters of a tooltip
MAX_QUOTED = 16000  # Graphviz refuses a quoted string over 16384 bytes


def cut(text: str, limit: int) -> str:
    """`text`, or its first `limit - 1` characters and an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote(text: str, limit: int = MAX_TOOLTIP) -> str:
    """`text` as a double-quoted DOT string that Graphviz shows verbatim (cut to `limit`)."""
    inner = _escape(cut(text, limit))
    if len(inner.encode("utf-8", "replace")) > MAX_QUOTED:  # entities and escapes grew it
        inner = _escape(cut(text, MAX_QUOTED // 8))
    return f'"{inner}"'


def _lines(*parts: str) -> str:
    """Centred lines of a label, empty parts left out."""
    return quote("\n".join(p for p in parts if p))


def _left_lines(*parts: str) -> str:
    """Left-justified lines set off from the edge they label (thick edges would cover them)."""
    lines = [cut(line, MAX_LABEL) for p in parts if p
             for line in p.replace("\r", "\n").split("\n")][:20]
    return '"' + "".join(f"  {_escape(line)}\\l" for line in lines) + '"'


def _scale(g: nx.MultiDiGraph) -> tuple[float, float]:
    weights = [a["bytes_per_step_mean"] for _, _, a in g.edges(data=True)
               if a["bytes_per_step_mean"] > 0]
    if not weights:
        return (1.0, 1.0)
    return (math.log(min(weights)), math.log(max(weights)))


def _weight(value: float, scale: tuple[float, float]) -> float | None:
    """0..1 on the log scale of this graph's edges; None for an edge that moved no bytes."""
    if value <= 0:
        return None
    lo, hi = scale
    return 1.0 if hi == lo else (math.log(value) - lo) / (hi - lo)


def _edge_style(value: float, scale: tuple[float, float]) -> dict[str, str]:
    w = _weight(value, scale)
    if w is None:
        return {"color": f'"{ZERO_COLOR}"', "penwidth": f"{MIN_PENWIDTH:.2f}", "style": "dotted"}
    color = PALETTE[min(len(PALETTE) - 1, int(w * len(PALETTE)))]
    width = MIN_PENWIDTH + w * (MAX_PENWIDTH - MIN_PENWIDTH)
    return {"color": f'"{color}"', "fontcolor": f'"{color}"', "penwidth": f"{width:.2f}"}


def _node_label(name: str, a: dict[str, Any]) -> str:
    flows = []
    if a["bytes_in"]:
        flows.append(f"in {fmt_bytes(a['bytes_in_per_step'])}/step")
    if a["bytes_out"]:
        flows.append(f"out {fmt_bytes(a['bytes_out_per_step'])}/step")
    return _lines(cut(a.get("label", name), MAX_LABEL), " · ".join(flows))


def _edge_label(a: dict[str, Any]) -> str:
    copied = [t for t in a["transports"] if t != "ref"]
    how = f" · {', '.join(copied)}" if copied else ""
    return _left_lines(cut(a["name"], MAX_LABEL), f"{fmt_bytes(a['bytes_per_step_mean'])}/step{how}")


def _edge_tooltip(a: dict[str, Any]) -> str:
    return _lines(
        a["label"],
        f"{a['hops']} hop{'s' if a['hops'] != 1 else ''}, {fmt_bytes(a['total_bytes'])} in all, "
        f"p50 {fmt_bytes(a['p50_bytes'])} / max {fmt_bytes(a['max_bytes'])} per hop",
    )


def _attrs(pairs: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in pairs.items())


def dot_source(g: nx.MultiDiGraph, *, title: str | None = None) -> str:
    """The DOT text of a graph from `flowmap.model.graph.build_graph`; deterministic."""
    nodes = sorted(g.nodes(data=True), key=lambda n: (n[1]["order"], n[0]))
    ids = {name: f"n{i}" for i, (name, _) in enumerate(nodes)}
    run = os.path.basename(os.path.normpath(str(g.graph.get("run", "")))) or "run"
    heading = title if title is not None else (
        f"flowmap · {run} · {g.graph.get('num_steps', 1)} steps · "
        f"{fmt_bytes(g.graph.get('total_bytes_per_step', 0))}/step across all seams"
    )
    out = [
        "digraph flowmap {",
        f"  graph [rankdir=TB, fontname=Helvetica, fontsize=12, labelloc=t, labeljust=l, "
        f"nodesep=0.4, ranksep=0.9, label={quote(heading)}];",
        '  node [shape=box, style="rounded,filled", fillcolor="#f7f7f7", color="#737373", '
        "fontname=Helvetica, fontsize=11];",
        "  edge [fontname=Helvetica, fontsize=9, arrowsize=0.7];",
    ]
    for name, a in nodes:
        tip = _lines(name, ", ".join(a["instances"]) if len(a["instances"]) > 1 else "")
        out.append(f"  {ids[name]} [{_attrs({'id': quote(ids[name]), 'label': _node_label(name, a), 'tooltip': tip})}];")
    scale = _scale(g)
    edges = sorted(g.edges(keys=True, data=True), key=lambda e: e[2])
    for i, (u, v, _, a) in enumerate(edges):
        attrs = {"id": quote(f"e{i}"), "label": _edge_label(a), "tooltip": _edge_tooltip(a)}
        attrs.update(_edge_style(a["bytes_per_step_mean"], scale))
        if a["back_edge"]:
            attrs["constraint"] = "false"
            attrs["style"] = "dashed"
        out.append(f"  {ids[u]} -> {ids[v]} [{_attrs(attrs)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def write_dot(run: Any, path: str, *, expand_instances: bool = False) -> str:
    """Write the DOT of `run` to `path`; returns the path written."""
    from flowmap.model.graph import build_graph

    text = dot_source(build_graph(run, expand_instances=expand_instances))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path
