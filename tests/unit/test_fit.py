"""The HTML graph's owners are drawn large enough that the first view at 1280x800 holds
every name at 11 px: the fit's passes, and the memo that spares a live page from redoing them.

GIVEN the RL pipeline's graph and the fan-out of a driver to many stages,
WHEN fitted,
THEN at the zoom the page opens at, every box holds its name at 11 px or more.
"""

from __future__ import annotations

from flowmap.reporters import fit
from flowmap.reporters.layered import layered
from flowmap.reporters.layout import layout_graph
from flowmap.reporters.layout_records import EdgeSpec, Layout, NodeSpec

RL = [
    ("dataset", "driver"), ("driver", "rollout/0"), ("driver", "rollout/1"),
    ("rollout/0", "env"), ("env", "rollout/0"), ("rollout/1", "env"), ("env", "rollout/1"),
    ("rollout/0", "ready_buffer"), ("rollout/1", "ready_buffer"), ("ready_buffer", "batcher"),
    ("batcher", "reward"), ("reward", "advantage"), ("advantage", "trainer/rank0"),
    ("advantage", "trainer/rank1"), ("trainer/rank0", "weight_sync"),
    ("weight_sync", "rollout/0"), ("weight_sync", "rollout/1"),
] + [("driver", f"extra_stage_{i}") for i in range(4)]


def build_for(pairs, calls=None):
    names = list(dict.fromkeys(n for p in pairs for n in p))

    def build(scale: float, engine: str) -> Layout:
        if calls is not None:
            calls.append(scale)
        nodes = [NodeSpec(n, (24 + 7.2 * len(n)) * scale, 30 * scale) for n in names]
        edges = [EdgeSpec(f"e{i}", a, b, 80, 2) for i, (a, b) in enumerate(pairs)]
        return layout_graph(nodes, edges, engine)

    return build


def test_the_fitted_layout_holds_11_px_names_at_the_zoom_it_opens_at():
    calls: list[float] = []
    placed, scale = fit.fitted(build_for(RL, calls), "layered")
    assert fit.open_zoom(placed) * scale * fit.NODE_FONT_PX >= fit.LEGIBLE_PX
    assert fit.min_zoom(scale) <= fit.open_zoom(placed)
    assert len(calls) > 1 and scale > 1  # at 1:1 size these boxes would cut their names


def test_a_small_graph_keeps_its_size():
    placed, scale = fit.fitted(build_for([("a", "b"), ("b", "c")]), "layered")
    assert scale == 1.0 and fit.min_zoom(scale) == round(11 / 12, 3)


def test_the_memo_lays_one_graph_out_once():
    seen: list[int] = []

    def place(nodes, edges, engine):
        seen.append(len(nodes))
        return layout_graph(nodes, edges, engine)

    memo = fit._Memo()
    placer = memo.place(place)
    nodes = [NodeSpec("a", 40, 30), NodeSpec("b", 40, 30)]
    edges = [EdgeSpec("e0", "a", "b", 40, 2)]
    first = placer(nodes, edges, "layered")
    assert memo.place(place)(list(nodes), list(edges), "layered") is first and seen == [2]
    placer([NodeSpec("a", 41, 30), NodeSpec("b", 40, 30)], edges, "layered")
    assert seen == [2, 2]  # another size is another layout


def test_a_large_graph_is_laid_out_once_as_asked():
    calls: list[float] = []
    pairs = [(f"a{i}", f"b{i}") for i in range(200)]
    placed, scale = fit.fitted(build_for(pairs, calls), "layered", 400)
    assert calls == [1.0] and scale == 1.0 and placed.engine == "layered"


def test_a_graph_as_wide_as_the_panel_takes_its_height_too():
    # GIVEN a layout twice as wide as the panel and only three rows tall: opened at 0.5 it
    # would fill a strip across the panel, its edge labels crowded between the rows
    nodes = [NodeSpec(f"n{i}", 400, 30) for i in range(9)]
    pairs = [(f"n{i}", f"n{i + 3}") for i in range(6)]
    edges = [EdgeSpec(f"e{i}", a, b, 80, 2) for i, (a, b) in enumerate(pairs)]
    placed = layered(nodes, edges, 10_000.0)  # rows of three: never wrapped
    k = fit.PANEL_W_PX / placed.width
    assert k < 1 and placed.height * k < fit.PANEL_H_PX * 0.6
    out = fit.filled(placed, 30)
    # THEN it opens at the same zoom, taller: the gaps between its rows grew, up to the panel
    assert out.width == placed.width and fit.open_zoom(out) == fit.open_zoom(placed)
    rows = sorted({y for _, y in placed.nodes.values()})
    gaps = sum(b - a - 30 for a, b in zip(rows, rows[1:]))  # between the rows' boxes
    assert out.height == round(placed.height + gaps * (fit.MAX_GAP_STRETCH - 1), 1) \
        or abs(out.height * k - fit.PANEL_H_PX) < 1
    assert out.height > placed.height * 1.3
    # boxes keep their size and their rows' order; every arrow still leaves a box's bottom
    # edge and ends at the next one's top
    for e, (a, b) in zip(edges, pairs):
        (x0, y0), (_, y1) = out.edges[e.id].points[0], out.edges[e.id].points[-1]
        assert abs(y0 - (out.nodes[a][1] + 15)) < 0.2 and abs(y1 - (out.nodes[b][1] - 15)) < 0.2
        assert x0 == placed.edges[e.id].points[0][0]
    assert sorted(out.nodes, key=lambda n: out.nodes[n][1]) == sorted(placed.nodes, key=lambda n: placed.nodes[n][1])
    # a page that never opens it below 1:1 (its boxes need that to hold their names) keeps it
    assert fit.filled(placed, 30, min_k=1.0) is placed
    # opened at no less than 0.8, it is stretched no taller than the panel at 0.8
    assert fit.filled(placed, 30, min_k=0.8).height * 0.8 <= fit.PANEL_H_PX + 1


def test_a_graph_that_opens_at_one_to_one_keeps_its_shape():
    placed = layout_graph([NodeSpec("a", 60, 30), NodeSpec("b", 60, 30)], [EdgeSpec("e", "a", "b", 40, 2)],
                          "layered")
    assert fit.filled(placed, 30) is placed
