"""What the HTML graph draws and how large, shared by the page's data and its flow.

Sizes are layout pixels at 1:1; the page draws labels larger below 1:1 (`flowmap.js`,
LEGIBLE_PX), so every label it shows is at least 11 CSS px.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from flowmap.reporters.layout_records import EdgeSpec, Layout, NodeSpec, text_width_px

#: Label sizes in layout pixels.
NODE_FONT_PX = 12
EDGE_FONT_PX = 11
#: Longer names are cut on the graph (the full text is the hover title and the side panel):
#: one 60-character payload name would otherwise widen every layer it crosses.
MAX_NODE_LABEL_CHARS = 24
MAX_EDGE_LABEL_CHARS = 18
NODE_HEIGHT_PX = 30


Place = Callable[[list[NodeSpec], list[EdgeSpec], str], Layout]


def upwards(points: list[tuple[float, float]]) -> bool:
    """An edge drawn against the top-down flow: it closes a cycle (weight sync -> rollout)."""
    return points[-1][1] < points[0][1] - 1.0


def short_label(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the cut marked by an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def node_width(name: str, driver: bool = False) -> float:
    return max(64.0, text_width_px(node_label(name, driver), NODE_FONT_PX) + 24.0)


def node_label(name: str, driver: bool = False) -> str:
    return short_name(name, MAX_NODE_LABEL_CHARS) + (" (driver)" if driver else "")


def short_name(name: str, limit: int) -> str:
    """An owner's name cut to `limit` characters in the middle, its last part kept: owners of
    one function or class differ at the end (`sequences_log_probs/model` and `.../model+grad`,
    `Trainer.generate` and `Trainer.score`), so a cut end made them read the same."""
    if len(name) <= limit:
        return name
    cut = max(name.rfind("/"), name.rfind("."))
    tail = name[cut:] if cut > 0 else ""
    if not tail or len(tail) > limit - 5:  # no last part, or too long to keep whole: its end
        tail = name[-(limit - 5):]
    return name[: limit - 1 - len(tail)] + "…" + tail


def label_width(name: str) -> float:
    # The page draws two lines, the payload name over "123 KiB/step"; room for the widest figure.
    shown = short_label(name, MAX_EDGE_LABEL_CHARS)
    return text_width_px(max(shown, "999 KiB/step", key=len), EDGE_FONT_PX)


def num(v: float | int | None, digits: int = 6) -> float | int | None:
    """JSON-safe and stable: ints stay ints, floats keep `digits` significant digits, NaN/inf -> None."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v
    if not math.isfinite(v):
        return None
    if v == int(v) and abs(v) < 2**53:
        return int(v)
    return float(f"{v:.{digits}g}")
