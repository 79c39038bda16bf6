"""How large the HTML graph draws its owners, so the first view of a 1280x800 window is legible.

The page opens fitted to its graph panel, and every name on it is drawn at
11 CSS px or more: below 1:1 the layout's text grows by 1/zoom. A box sized
for 12-px text would then cut its own name (the demo opened at 0.53 drew
21-px names in 12-px boxes). So the graph is laid out again with its owners
scaled up until, at the zoom the panel gives it, each box
holds its name at 11 px: a few passes, each from the last one's zoom. When
Graphviz's layout cannot get there (it does not wrap a wide layer), the
built-in layered one, which does, is tried too. Edge labels keep their 1:1 room:
scaled, they would widen the graph as fast as they grow. Instead a graph that opens as
wide as the panel gets the panel's height too (`filled`: the gaps between its rows
stretched), and the page moves each label along its own edge to a place where it overlaps
nothing (`labels.js`); one with no such place hides, and the legend says how many.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from flowmap.reporters.html_sizes import Place
from flowmap.reporters.layout import dot_available
from flowmap.reporters.layout_records import (
    MAX_OPEN_K,
    PANEL_H_PX,
    PANEL_W_PX,
    EdgeRoute,
    EdgeSpec,
    Layout,
    NodeSpec,
)

NODE_FONT_PX = 12.0
LEGIBLE_PX = 11.0
PASSES = 6
BISECTIONS = 3
#: Past this many owners + edges no window shows every name at 11 px, and each layout
#: costs more: one pass, as asked.
FIT_MAX_ELEMENTS = 300

#: (scale, engine) -> the layout with owners `scale` times their 1:1 size.
Build = Callable[[float, str], Layout]
#: Layouts kept by their inputs: a live page lays out the same graph at every update.
MEMO_SIZE = 16


class _Memo:
    """The last `MEMO_SIZE` layouts, by placer and inputs. The fit asks for a few layouts
    of one graph; a live page (whose placer keeps only its last one) asks again at every
    update, and would otherwise lay the graph out that many times each time. Whether
    Graphviz is installed is part of the inputs: "auto" depends on it."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Any, Layout] = OrderedDict()
        self._lock = threading.Lock()

    def place(self, place: Place) -> Place:
        def placed(nodes: list[NodeSpec], edges: list[EdgeSpec], engine: str) -> Layout:
            key = (place, engine, dot_available(), tuple((n.id, n.width, n.height) for n in nodes),
                   tuple((e.id, e.src, e.dst, e.label_width, e.label_lines, e.back) for e in edges))
            with self._lock:
                hit = self._kept.get(key)
                if hit is not None:
                    self._kept.move_to_end(key)
                    return hit
            out = place(nodes, edges, engine)
            with self._lock:
                self._kept[key] = out
                while len(self._kept) > MEMO_SIZE:
                    self._kept.popitem(last=False)
            return out

        return placed


memo = _Memo()


def open_zoom(placed: Layout) -> float:
    """The zoom the page opens `placed` at in the panel (`openView`, fitted)."""
    return min(MAX_OPEN_K, PANEL_W_PX / max(1.0, placed.width), PANEL_H_PX / max(1.0, placed.height))


def fitted(build: Build, engine: str, elements: int = 0) -> tuple[Layout, float]:
    """The layout and its scale: the smallest scale found whose boxes hold 11-px names at the
    opening zoom, else the closest one (the page then opens at the smallest zoom that keeps
    names whole, and pans). `elements`: owners + edges; a large graph gets one pass."""
    if elements > FIT_MAX_ELEMENTS:
        return build(1.0, engine), 1.0
    best: tuple[float, Layout, float] | None = None
    for eng in (engine, "layered") if engine == "auto" else (engine,):
        lo, scale, last = 1.0, 1.0, 0.0
        for _ in range(PASSES):
            placed = build(scale, eng)
            legible = legibility(placed, scale)
            if best is None or legible > best[0]:
                best = (legible, placed, scale)
            if legible >= 1.0:
                return _smallest(build, eng, lo, scale, placed)
            if legible < last * 1.02:  # the graph widens as fast as its boxes grow: no use
                break
            # the graph grows slower than its boxes: a bolder step, then back down (_smallest)
            lo, scale, last = scale, round(scale / legible ** 2 * 1.04, 3), legible
    assert best is not None
    return best[1], best[2]


def legibility(placed: Layout, scale: float) -> float:
    """1 or more: at the zoom `placed` opens at, its boxes hold their names at 11 px."""
    return open_zoom(placed) * scale * NODE_FONT_PX / LEGIBLE_PX


def _smallest(build: Build, engine: str, lo: float, hi: float, placed: Layout
              ) -> tuple[Layout, float]:
    """Between an illegible scale `lo` and a legible `hi`, a smaller legible one (bisection):
    boxes no larger than they need be leave the edges room."""
    for _ in range(BISECTIONS if hi > lo else 0):
        mid = round((lo + hi) / 2, 3)
        trial = build(mid, engine)
        if legibility(trial, mid) >= 1.0:
            hi, placed = mid, trial
        else:
            lo = mid
    return placed, hi


def min_zoom(scale: float) -> float:
    """The smallest zoom at which a box of this scale holds its name at 11 px."""
    return round(LEGIBLE_PX / (NODE_FONT_PX * scale), 3)


#: How far `filled` may stretch the gaps between a layout's rows.
MAX_GAP_STRETCH = 2.5


def filled(placed: Layout, row_height: float, min_k: float = 0.0) -> Layout:
    """`placed` with the gaps between its rows of owners stretched so that, opened as wide as
    the panel allows, it also takes the panel's height. A graph as wide as the panel was
    drawn in a strip across it, its edge labels crowded into the gaps between its rows while
    the panel's height stood empty: labels (drawn at 11 px, larger than the room a layout
    keeps them below 1:1) find their places in the wider gaps. A graph that opens at 1:1 or
    more keeps its shape: its labels have their room. `min_k`: the page never opens below it
    (`min_zoom`), so the graph is not stretched past the panel's height at that zoom."""
    k = max(min_k, min(MAX_OPEN_K, PANEL_W_PX / max(1.0, placed.width)))
    rows = sorted({round(y, 1) for _, y in placed.nodes.values()})
    if k >= 1.0 or len(rows) < 2 or placed.height * k >= PANEL_H_PX:
        return placed
    bands: list[list[float]] = []
    for y in rows:  # each row's top and bottom; rows of touching boxes are one band
        if bands and y - row_height / 2 <= bands[-1][1]:
            bands[-1][1] = y + row_height / 2
        else:
            bands.append([y - row_height / 2, y + row_height / 2])
    gaps = sum(b[0] - a[1] for a, b in zip(bands, bands[1:]))
    if gaps <= 0:
        return placed
    stretch = min(MAX_GAP_STRETCH, 1.0 + (PANEL_H_PX / k - placed.height) / gaps)
    shifts = [0.0]
    for a, b in zip(bands, bands[1:]):
        shifts.append(shifts[-1] + (b[0] - a[1]) * (stretch - 1.0))

    def at(y: float) -> float:
        for i, (lo, hi) in enumerate(bands):
            if y <= hi:
                if y >= lo or i == 0:
                    return y + shifts[i]
                prev = bands[i - 1][1]  # in the gap above this band
                return round(prev + shifts[i - 1] + (y - prev) * stretch, 1)
        return y + shifts[-1]

    out = Layout(placed.engine, placed.width, round(at(placed.height), 1))
    out.nodes = {k_: (x, round(at(y), 1)) for k_, (x, y) in placed.nodes.items()}
    out.edges = {k_: EdgeRoute([(x, round(at(y), 1)) for x, y in e.points], (e.label[0], round(at(e.label[1]), 1)))
                 for k_, e in placed.edges.items()}
    return out
