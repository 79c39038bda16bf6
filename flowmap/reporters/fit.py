"""How large the HTML graph draws its owners, so the first view of a 1280x800 window is legible.

The page opens fitted to its graph panel, and every name on it is drawn at
11 CSS px or more: below 1:1 the layout's text grows by 1/zoom. A box sized
for 12-px text would then cut its own name (the demo opened at 0.53 drew
21-px names in 12-px boxes). So the graph is laid out again with its owners
scaled up until, at the zoom the panel gives it, each box
holds its name at 11 px: a few passes, each from the last one's zoom. When
Graphviz's layout cannot get there (it does not wrap a wide layer), the
built-in layered one, which does, is tried too. Edge labels keep their 1:1 room:
scaled, they would widen the graph as fast as they grow; where one drawn at 11 px
would overlap, the page hides it and its legend says so.
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
