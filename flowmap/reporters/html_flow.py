"""The HTML graph of a script's flow: stages placed by the flow's edges, the driver apart.

A script whose stages are seams called from one driver records a star of seams
around it; the page draws the flow instead (`RunView.flow`): black arrows from
the stage that made data to the stage that used it, each labelled with the
consumer's name for it and its bytes per step, the driver one box with no line.
"""

from __future__ import annotations

from typing import Any

from flowmap.model.flow import UNNAMED_DRIVER, Flow, FlowEdge, star_center
from flowmap.model.format import fmt_per_step
from flowmap.model.types import SeamStats
from flowmap.model.view import RunView
from flowmap.reporters.html_sizes import (
    MAX_EDGE_LABEL_CHARS,
    NODE_HEIGHT_PX,
    Place,
    label_width,
    node_width,
    num,
    short_label,
    upwards,
)
from flowmap.reporters.layout import layout_graph
from flowmap.reporters.layout_records import EdgeRoute, EdgeSpec, Layout, NodeSpec


def flow_driver(view: RunView) -> str | None:
    """The owner that calls every stage and hands their data on: the unnamed `main` of a
    script's seams, or the centre of a star of seams. Drawn as one node, its seams unrouted."""
    owners = {n.name for n in view.pipeline.nodes}
    if UNNAMED_DRIVER in owners:
        return UNNAMED_DRIVER
    centre = star_center(view.seams)
    return centre if centre in owners else None


def drawn_flow(flow: Flow, driver: str | None, owner_id: dict[str, str]
               ) -> list[tuple[int, FlowEdge]]:
    """The flow edges the graph draws: between two stages, neither of them the driver (what the
    driver made or got back is in the seam table and in the driver's summary)."""
    return [(i, e) for i, e in enumerate(flow.edges)
            if e.src in owner_id and e.dst in owner_id and driver not in (e.src, e.dst)]


def flow_layout(owners: list[str], seams: list[SeamStats], flow: Flow, driver: str | None,
                owner_id: dict[str, str], engine: str, place: Place = layout_graph,
                scale: float = 1.0) -> Layout:
    """Owners placed by the flow's producer -> consumer edges, in the flow's order; a seam
    between two stages a straight line; the driver's seams are not routed (a star)."""
    rank = {name: k for k, name in enumerate(flow.stages)}
    ordered = sorted(owners, key=lambda n: (n != driver, rank.get(n, len(rank))))
    nodes = [NodeSpec(owner_id[name], node_width(name, name == driver) * scale, NODE_HEIGHT_PX * scale)
             for name in ordered]
    drawn = drawn_flow(flow, driver, owner_id)
    edges = [EdgeSpec(f"f{i}", owner_id[e.src], owner_id[e.dst], label_width(flow_name(e)), 2,
                      rank[e.dst] <= rank[e.src])  # data going back up the flow: drawn against it
             for i, e in drawn]
    # a stage fed only through the driver (a buffer's `sample`) follows the stage before it
    # in the flow, instead of starting at the top as a source would
    fed = {e.dst for _, e in drawn if rank[e.src] < rank[e.dst]}
    stages = [s for s in flow.stages if s != driver and s in owner_id]
    # stages with no arrow before the first one joined (a DataLoader's workers, fed and read
    # by the driver) take the top layer alone: beside it, the arrows' tree hung under the
    # stage next to them and the graph grew as wide as both
    joined = {n for _, e in drawn for n in (e.src, e.dst)}
    lead = next((k for k, s in enumerate(stages) if s in joined), 0)
    # a stage whose data only goes back up the flow (the weight sync, closing the loop) is
    # placed by that edge, beside where its data lands, not chained under the last stage
    forward = {e.src for _, e in drawn if rank[e.src] < rank[e.dst]}
    closers = {e.src for _, e in drawn if rank[e.dst] <= rank[e.src]} - forward
    edges += [EdgeSpec(f"after{k}", owner_id[a], owner_id[b], order_only=True,
                       below=k + 1 == lead)
              for k, (a, b) in enumerate(zip(stages, stages[1:])) if b not in fed | closers]
    # an owner the flow passes through without a stage of its own (it hands on another's
    # tensors: `join_experience_batch` of `zero_pad_sequences`'s) goes by the first stage it
    # trades with, not at the top as a source
    for name in owners:
        partners = [rank[p] for s in seams for p in (s.src, s.dst)
                    if name in (s.src, s.dst) and p != name and p in rank and p != driver]
        if name not in rank and name != driver and partners:
            first = flow.stages[min(partners)]
            edges.append(EdgeSpec(f"by-{owner_id[name]}", owner_id[first], owner_id[name], order_only=True))
    kept = place(nodes, edges, engine)  # kept by the memo: the seams' lines go on a copy
    placed = Layout(kept.engine, kept.width, kept.height, dict(kept.nodes), dict(kept.edges))
    for i, s in enumerate(seams):
        (x0, y0), (x1, y1) = placed.nodes[owner_id[s.src]], placed.nodes[owner_id[s.dst]]
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        placed.edges[f"s{i}"] = EdgeRoute([(x0, y0), (mx, my), (mx, my), (x1, y1)], (mx, my))
    return placed


def flow_data(view: RunView, flow: Flow, driver: str | None, owner_id: dict[str, str],
              placed: Layout, seam_id: dict[tuple[str, str, str], str]) -> dict[str, Any]:
    """The page's `flow`: the arrows it draws, each with the figure its label and the Flow
    table show (the same number), the stages in order, and which owner is the driver."""
    steps = view.num_steps
    edges = []
    into: dict[str, list[tuple[str, str]]] = {}  # stage -> (seam name, id) of the seams into it
    for key, sid in seam_id.items():
        into.setdefault(key[1], []).append((key[2], sid))
    for i, e in drawn_flow(flow, driver, owner_id):
        route = placed.edges[f"f{i}"]
        calls = ", ".join(e.names)
        edges.append({
            "id": f"f{i}", "src": owner_id[e.src], "dst": owner_id[e.dst],
            "short": short_label(flow_name(e), MAX_EDGE_LABEL_CHARS),
            "label": f"{e.src} feeds {e.dst} ({flow_name(e)}) in {calls}: {e.hops} hops",
            "bytes": e.nbytes, "bytes_per_step": num(e.nbytes / steps), "hops": e.hops,
            "figure": fmt_per_step(e.nbytes / steps, view.has_steps),
            "back": upwards(route.points),
            # the seams whose hops carried it: the hover readout names them and their figures
            "via": sorted(sid for name, sid in into.get(e.dst, ()) if name in e.names),
            "path": [c for p in route.points for c in p], "label_at": list(route.label),
        })
    out: dict[str, Any] = {"stages": list(flow.stages), "order": flow.order_text(), "edges": edges}
    if driver is not None:
        out["driver"] = owner_id[driver]
    return out


def flow_name(e: FlowEdge) -> str:
    """What the consumer calls the data (`sequences`), else the payload's name."""
    return ", ".join(e.args or e.names)


def covered_pairs(flow: Flow, driver: str | None, owner_id: dict[str, str]) -> set[tuple[str, str]]:
    """Owner pairs a black arrow joins (either way): a seam between them is not drawn again."""
    return {p for _, e in drawn_flow(flow, driver, owner_id) for p in ((e.src, e.dst), (e.dst, e.src))}
