"""Graph layout: the built-in layered engine on its own, and Graphviz with its fallback."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from flowmap.reporters.layered import layered
from flowmap.reporters.layered_ranks import MAX_LAYER_PX
from flowmap.reporters.layout import layout_graph
from flowmap.reporters.layout_records import PANEL_H_PX, PANEL_W_PX, EdgeSpec, Layout, NodeSpec

RL = [
    ("dataset", "driver"), ("driver", "rollout/0"), ("driver", "rollout/1"),
    ("rollout/0", "env"), ("env", "rollout/0"), ("rollout/1", "env"), ("env", "rollout/1"),
    ("rollout/0", "ready_buffer"), ("rollout/1", "ready_buffer"), ("ready_buffer", "batcher"),
    ("batcher", "reward"), ("reward", "advantage"), ("advantage", "trainer/rank0"),
    ("advantage", "trainer/rank1"), ("trainer/rank0", "weight_sync"),
    ("weight_sync", "rollout/0"), ("weight_sync", "rollout/1"),
]


def graph(pairs, extra_nodes=()):
    names = list(dict.fromkeys([n for p in pairs for n in p] + list(extra_nodes)))
    nodes = [NodeSpec(n, 20 + 7 * len(n), 30) for n in names]
    edges = [EdgeSpec(f"e{i}", a, b, 60) for i, (a, b) in enumerate(pairs)]
    return nodes, edges


def start_end(placed: Layout, edge_id: str):
    pts = placed.edges[edge_id].points
    return pts[0], pts[-1]


def assert_well_formed(placed: Layout, nodes, edges):
    assert set(placed.nodes) == {n.id for n in nodes}
    assert set(placed.edges) == {e.id for e in edges}
    for e in edges:
        pts = placed.edges[e.id].points
        assert len(pts) >= 4 and (len(pts) - 1) % 3 == 0, "a cubic Bezier: start + 3 points a segment"
        assert all(-1 <= x <= placed.width + 1 and -1 <= y <= placed.height + 1 for x, y in pts)


def test_layered_draws_the_pipeline_top_down_and_the_loop_back_up():
    nodes, edges = graph(RL)
    placed = layout_graph(nodes, edges, "layered")
    assert placed.engine == "layered"
    assert_well_formed(placed, nodes, edges)
    y = {k: v[1] for k, v in placed.nodes.items()}
    order = ["dataset", "driver", "rollout/0", "ready_buffer", "batcher", "reward", "advantage",
             "trainer/rank0", "weight_sync"]
    assert [y[n] for n in order] == sorted(y[n] for n in order)
    assert y["rollout/0"] == y["rollout/1"]
    (sx, sy), (ex, ey) = start_end(placed, "e15")  # weight_sync -> rollout/0, the RL loop
    assert ey < sy
    (sx, sy), (ex, ey) = start_end(placed, "e7")  # rollout/0 -> ready_buffer
    assert ey > sy


def test_layered_owners_of_one_layer_do_not_overlap():
    nodes, edges = graph(RL)
    placed = layout_graph(nodes, edges, "layered")
    width = {n.id: n.width for n in nodes}
    rows: dict[float, list[tuple[float, str]]] = {}
    for k, (x, y) in placed.nodes.items():
        rows.setdefault(y, []).append((x, k))
    for row in rows.values():
        row.sort()
        for (x0, a), (x1, b) in zip(row, row[1:]):
            assert x0 + width[a] / 2 < x1 - width[b] / 2


def test_layered_handles_self_loops_parallel_edges_isolated_nodes_and_sourceless_cycles():
    pairs = [("a", "a"), ("a", "b"), ("a", "b"), ("c", "d"), ("d", "c")]
    nodes, edges = graph(pairs, extra_nodes=["lonely"])
    placed = layout_graph(nodes, edges, "layered")
    assert_well_formed(placed, nodes, edges)
    assert placed.edges["e1"].points != placed.edges["e2"].points  # parallel edges stay apart


def test_layered_is_deterministic():
    nodes, edges = graph(RL)
    assert layout_graph(nodes, edges, "layered") == layout_graph(nodes, edges, "layered")


def test_layered_copes_with_a_wide_graph_quickly():
    pairs = [(f"src{i % 7}", f"dst{(i * 13) % 41}") for i in range(300)] + [("dst3", "src1")]
    nodes, edges = graph(pairs)
    t0 = time.perf_counter()
    placed = layout_graph(nodes, edges, "layered")
    assert time.perf_counter() - t0 < 10
    assert_well_formed(placed, nodes, edges)


def test_empty_graph():
    placed = layout_graph([], [], "layered")
    assert placed.nodes == {} and placed.edges == {}


@pytest.mark.skipif(not shutil.which("dot"), reason="Graphviz `dot` is not installed")
def test_dot_places_the_graph_when_installed():
    nodes, edges = graph(RL + [("driver", "driver")])
    placed = layout_graph(nodes, edges, "auto")
    assert placed.engine == "dot"
    assert_well_formed(placed, nodes, edges)
    y = {k: v[1] for k, v in placed.nodes.items()}
    assert y["dataset"] < y["driver"] < y["ready_buffer"] < y["weight_sync"]


def test_a_broken_dot_falls_back_to_the_built_in_layout(tmp_path, monkeypatch):
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\necho 'dot: out of luck' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    nodes, edges = graph(RL)
    assert layout_graph(nodes, edges, "auto").engine == "layered"
    assert layout_graph(nodes, edges, "dot").engine == "layered"


def test_layered_wraps_a_wide_fan_out_into_rows_that_share_their_width():
    pairs = [("driver", f"stage_{i:02d}") for i in range(14)]
    nodes, edges = graph(pairs)
    placed = layout_graph(nodes, edges, "layered")
    assert_well_formed(placed, nodes, edges)
    rows = sorted({y for _, y in placed.nodes.values()})
    assert len(rows) >= 3  # the driver, then its 14 stages in rows
    widest_row = max(sum(n.width for n in nodes if placed.nodes[n.id][1] == y) for y in rows)
    assert widest_row <= MAX_LAYER_PX
    assert placed.width < 1.5 * MAX_LAYER_PX  # the rows are not laid side by side


def test_layered_draws_the_edges_the_caller_marks_back_upwards():
    pairs = [("a", "b"), ("b", "c"), ("c", "a")]
    names = ["b", "c", "a"]  # BFS from any node would choose another back edge
    nodes = [NodeSpec(n, 40, 30) for n in names]
    edges = [EdgeSpec(f"e{i}", a, b, 40, 2, back=(a, b) == ("a", "b")) for i, (a, b) in enumerate(pairs)]
    placed = layout_graph(nodes, edges, "layered")
    y = {k: v[1] for k, v in placed.nodes.items()}
    assert y["b"] < y["c"] < y["a"]
    (_, sy), (_, ey) = start_end(placed, "e0")
    assert ey < sy


def test_an_order_only_edge_places_its_owner_on_or_below_the_other_and_is_not_drawn():
    nodes = [NodeSpec(n, 40, 30) for n in ("a", "b", "c", "d")]
    edges = [EdgeSpec("e0", "a", "b", 40), EdgeSpec("e1", "c", "d", 40),
             EdgeSpec("o0", "b", "c", order_only=True)]  # c is a source, after b
    placed = layout_graph(nodes, edges, "layered")
    y = {k: v[1] for k, v in placed.nodes.items()}
    assert y["a"] < y["b"] <= y["c"] < y["d"]
    assert set(placed.edges) == {"e0", "e1"}


def test_stages_without_arrows_take_the_top_layer_alone_and_the_tree_starts_under_them():
    # GIVEN two stages joined by no arrow (a DataLoader's workers) before the first stage the
    # arrows fan out of: side by side with it, the fan-out hangs under it, beside them
    nodes = [NodeSpec(n, 180, 30) for n in ("w0", "w1", "gen", "lp0", "lp1", "lp2", "loss")]
    edges = [EdgeSpec(f"f{i}", "gen", f"lp{i}", 80) for i in range(3)]
    edges += [EdgeSpec(f"g{i}", f"lp{i}", "loss", 80) for i in range(3)]
    side = [EdgeSpec("o0", "w0", "w1", order_only=True), EdgeSpec("o1", "w1", "gen", order_only=True)]
    beside = layered(nodes, edges + side, MAX_LAYER_PX)  # one wide layer allowed
    side[1] = EdgeSpec("o1", "w1", "gen", order_only=True, below=True)
    under = layout_graph(nodes, edges + side, "layered")
    assert under.nodes["gen"][1] > under.nodes["w1"][1] == under.nodes["w0"][1]
    assert beside.nodes["gen"][1] == beside.nodes["w1"][1]
    assert under.width < beside.width - 150  # the tree no longer sits to the right of them
    assert set(under.edges) == {e.id for e in edges}
    # left to choose its width, the layout wraps the top layer too: no tree beside the workers
    wrapped = layout_graph(nodes, edges + side[:1] + [EdgeSpec("o1", "w1", "gen", order_only=True)], "layered")
    assert wrapped.width < beside.width - 150


def test_layered_wraps_its_layers_at_the_width_that_opens_largest_in_the_panel():
    # GIVEN a layer of three wide owners under one source: at the widest wrap they stand in
    # one row, and with their arrows' labels the layout is wider than the panel
    pairs = [("r", "a"), ("r", "b"), ("r", "c"), ("a", "d"), ("b", "d"), ("c", "e"), ("a", "e"),
             ("d", "f"), ("e", "f"), ("r", "f"), ("b", "g"), ("g", "f")]
    nodes, edges = graph(pairs)
    nodes = [NodeSpec(n.id, 180, 30) for n in nodes]
    edges = [EdgeSpec(e.id, e.src, e.dst, 80, 2) for e in edges]  # name over figure
    widest = layered(nodes, edges, MAX_LAYER_PX)
    chosen = layout_graph(nodes, edges, "layered")
    assert_well_formed(chosen, nodes, edges)

    def zoom(placed):
        return min(PANEL_W_PX / placed.width, PANEL_H_PX / placed.height)

    assert zoom(widest) < 1.0 <= zoom(chosen)  # wrapped narrower, it opens at 1:1
    assert chosen.height > widest.height
    # a small graph keeps the widest wrap: it opens at its largest either way
    small = graph([("a", "b"), ("b", "c")])
    assert layout_graph(*small, "layered") == layered(*small, MAX_LAYER_PX)
