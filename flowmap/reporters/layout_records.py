"""The records both HTML graph layouts share: what goes in (`NodeSpec`, `EdgeSpec`), what comes out.

A `Layout` holds node centres, and every edge as a cubic Bezier (`3k+1`
points, the last one the arrow tip) plus its label centre, in pixels with y
growing downwards. The built-in engine (`flowmap.reporters.layered`) imports
only these, and `flowmap.reporters.layout` (Graphviz `dot`, falling back to
the built-in engine) imports both: the arrows run one way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Point = tuple[float, float]

#: Pixels between two layers of nodes; every edge label sits on a half layer.
RANK_GAP_PX = 34.0
#: Horizontal gap between two owners in one layer.
NODE_GAP_PX = 22.0
#: The graph panel of a 1280x800 window, a little under what Chromium measures (836 x 573-611):
#: the room a layout is fitted to.
PANEL_W_PX = 820.0
PANEL_H_PX = 560.0
#: The page's zoom limits (`flowmap.js`): it never opens above MAX_OPEN_K.
MAX_OPEN_K = 1.5


@dataclass(slots=True)
class NodeSpec:
    id: str
    width: float
    height: float


@dataclass(slots=True)
class EdgeSpec:
    id: str
    src: str
    dst: str
    label_width: float = 0.0
    label_lines: int = 1
    #: Whether the edge goes against the flow (drawn upwards), when the caller knows the
    #: order (the flow's stages); None: the layout finds the edges that close cycles.
    back: bool | None = None
    #: Not drawn: only puts `dst` on `src`'s layer or below (the built-in layout; dot ignores it).
    order_only: bool = False
    #: With `order_only`: `dst` strictly below `src` (the first stage the arrows join, under
    #: the stages drawn with no arrow that come before it in the flow).
    below: bool = False


@dataclass(slots=True)
class EdgeRoute:
    points: list[Point]  # cubic Bezier: start, then (c1, c2, end) triples; the last end is the tip
    label: Point


@dataclass(slots=True)
class Layout:
    engine: str  # "dot" or "layered": which one actually placed the graph
    width: float
    height: float
    nodes: dict[str, Point] = field(default_factory=dict)  # node id -> centre
    edges: dict[str, EdgeRoute] = field(default_factory=dict)


def text_width_px(text: str, font_px: float) -> float:
    """A font-free estimate of rendered width: layout must not depend on the browser's fonts."""
    return math.ceil(len(text) * font_px * 0.6)
