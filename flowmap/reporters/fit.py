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

from collections.abc import Callable

from flowmap.reporters.layout_records import Layout

#: The graph panel of a 1280x800 window, a little under what Chromium measures (836 x 573-611).
PANEL_W_PX = 820.0
PANEL_H_PX = 560.0
#: The page's zoom limits (`flowmap.js`): it never opens above MAX_OPEN_K.
MAX_OPEN_K = 1.5
NODE_FONT_PX = 12.0
LEGIBLE_PX = 11.0
PASSES = 6

#: (scale, engine) -> the layout with owners `scale` times their 1:1 size.
Build = Callable[[float, str], Layout]


def open_zoom(placed: Layout) -> float:
    """The zoom the page opens `placed` at in the panel (`openView`, fitted)."""
    return min(MAX_OPEN_K, PANEL_W_PX / max(1.0, placed.width), PANEL_H_PX / max(1.0, placed.height))


def fitted(build: Build, engine: str) -> tuple[Layout, float]:
    """The layout and its scale: the first whose boxes hold 11-px names at the opening zoom,
    else the closest one (the page then opens at the smallest zoom that keeps names whole,
    and pans)."""
    best: tuple[float, Layout, float] | None = None
    for eng in (engine, "layered") if engine == "auto" else (engine,):
        scale, last = 1.0, 0.0
        for _ in range(PASSES):
            placed = build(scale, eng)
            legible = open_zoom(placed) * scale * NODE_FONT_PX / LEGIBLE_PX  # >= 1: names fit
            if best is None or legible > best[0]:
                best = (legible, placed, scale)
            if legible >= 1.0:
                return placed, scale
            if legible < last * 1.02:  # the graph widens as fast as its boxes grow: no use
                break
            scale, last = round(scale / legible * 1.06, 3), legible
    assert best is not None
    return best[1], best[2]


def min_zoom(scale: float) -> float:
    """The smallest zoom at which a box of this scale holds its name at 11 px."""
    return round(LEGIBLE_PX / (NODE_FONT_PX * scale), 3)
