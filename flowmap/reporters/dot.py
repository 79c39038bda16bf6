"""Graphviz DOT of a run's pipeline (`RunView.roles` or `.pipeline`): where the bytes go.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flowmap.model.format import fmt_bytes, fmt_per_step, fmt_steps
from flowmap.model.types import Edge, Node, SeamStats

if TYPE_CHECKING:
    from flowmap.model.view import RunView

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


def _scale(edges: tuple[Edge, ...]) -> tuple[float, float]:
    weights = [e.seam.bytes_per_step_mean for e in edges if e.seam.bytes_per_step_mean > 0]
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


def _node_label(n: Node, stepped: bool = True) -> str:
    flows = []
    if n.bytes_in:
        flows.append(f"in {fmt_per_step(n.bytes_in_per_step, stepped)}")
    if n.bytes_out:
        flows.append(f"out {fmt_per_step(n.bytes_out_per_step, stepped)}")
    return _lines(cut(n.label, MAX_LABEL), " · ".join(flows))


def _edge_label(s: SeamStats, stepped: bool = True) -> str:
    copied = [t for t in s.transports if t != "ref"]
    how = f" · {', '.join(copied)}" if copied else ""
    return _left_lines(cut(s.name, MAX_LABEL),
                       f"{fmt_per_step(s.bytes_per_step_mean, stepped)}{how}")


def _edge_tooltip(s: SeamStats) -> str:
    return _lines(
        s.label,
        f"{s.hops} hop{'s' if s.hops != 1 else ''}, {fmt_bytes(s.total_bytes)} in all, "
        f"p50 {fmt_bytes(s.p50_bytes)} / max {fmt_bytes(s.max_bytes)} per hop",
    )


def _attrs(pairs: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in pairs.items())


@dataclass(frozen=True, slots=True)
class DotOptions:
    """`instances`: one node per owner rather than per role; `title` replaces the heading."""

    instances: bool = False
    title: str | None = None


def report(view: RunView, options: DotOptions) -> str:
    return dot_source(view, instances=options.instances, title=options.title)


def dot_source(view: RunView, *, instances: bool = False, title: str | None = None) -> str:
    """The DOT text of the run's pipeline, one node per role (or per owner); deterministic.

    `title` replaces the heading; a projected run is headed as a projection.
    """
    p = view.pipeline_at(instances)
    ids = {n.name: f"n{i}" for i, n in enumerate(p.nodes)}
    run = os.path.basename(os.path.normpath(view.path)) or "run"
    stepped = view.has_steps
    if title is None and view.projection is not None:
        title = f"PROJECTION — {view.projection.note}"
    heading = title if title is not None else (
        f"flowmap · {run} · {fmt_steps(view.step_count)} · "
        f"{fmt_per_step(p.total_bytes_per_step, stepped)} across all seams"
    )
    if view.draws_flow and view.projection is None:
        return _flow_source(view, title or f"{heading} · the flow, from storage identity")
    out = [
        "digraph flowmap {",
        f"  graph [rankdir=TB, fontname=Helvetica, fontsize=12, labelloc=t, labeljust=l, "
        f"nodesep=0.4, ranksep=0.9, label={quote(heading)}];",
        '  node [shape=box, style="rounded,filled", fillcolor="#f7f7f7", color="#737373", '
        "fontname=Helvetica, fontsize=11];",
        "  edge [fontname=Helvetica, fontsize=9, arrowsize=0.7];",
    ]
    for n in p.nodes:
        tip = _lines(n.name, ", ".join(n.instances) if len(n.instances) > 1 else "")
        attrs = {"id": quote(ids[n.name]), "label": _node_label(n, stepped), "tooltip": tip}
        out.append(f"  {ids[n.name]} [{_attrs(attrs)}];")
    scale = _scale(p.edges)
    for i, e in enumerate(p.edges):
        s = e.seam
        edge = {"id": quote(f"e{i}"), "label": _edge_label(s, stepped),
                "tooltip": _edge_tooltip(s)}
        edge.update(_edge_style(s.bytes_per_step_mean, scale))
        if e.back_edge:
            edge["constraint"] = "false"
            edge["style"] = "dashed"
        out.append(f"  {ids[s.src]} -> {ids[s.dst]} [{_attrs(edge)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def _flow_source(view: RunView, heading: str) -> str:
    """The flow instead of the star around the driver: one node per stage (an owner, calls
    told apart by what they were given), one edge per producer -> consumer pair, in the order
    data moved through them."""
    flow, stepped = view.flow, view.has_steps
    ids = {name: f"n{i}" for i, name in enumerate(flow.stages)}
    steps = view.num_steps
    weights = [e.nbytes / steps for e in flow.edges if e.nbytes > 0]
    scale = (math.log(min(weights)), math.log(max(weights))) if weights else (1.0, 1.0)
    out = [
        "digraph flowmap {",
        f"  graph [rankdir=TB, fontname=Helvetica, fontsize=12, labelloc=t, labeljust=l, "
        f"nodesep=0.4, ranksep=0.7, label={quote(heading)}];",
        '  node [shape=box, style="rounded,filled", fillcolor="#f7f7f7", color="#737373", '
        "fontname=Helvetica, fontsize=11];",
        "  edge [fontname=Helvetica, fontsize=9, arrowsize=0.7];",
    ]
    for k, name in enumerate(flow.stages):
        label = _lines(f"{k + 1}. {cut(name, MAX_LABEL)}")
        out.append(f"  {ids[name]} [{_attrs({'id': quote(ids[name]), 'label': label})}];")
    pos = {name: k for k, name in enumerate(flow.stages)}
    for i, e in enumerate(flow.edges):
        per_step = e.nbytes / steps
        names = ", ".join(e.names)
        edge = {"id": quote(f"f{i}"),
                "label": _left_lines(cut(names, MAX_LABEL), fmt_per_step(per_step, stepped)),
                "tooltip": _lines(f"{e.src} feeds {e.dst}", f"{e.hops} hops, "
                                  f"{fmt_bytes(e.nbytes)} in all ({names})")}
        edge.update(_edge_style(per_step, scale))
        if pos[e.dst] <= pos[e.src]:  # data going back up the flow: drawn against it
            edge["constraint"] = "false"
            edge["style"] = "dashed"
        out.append(f"  {ids[e.src]} -> {ids[e.dst]} [{_attrs(edge)}];")
    out.append("}")
    return "\n".join(out) + "\n"
