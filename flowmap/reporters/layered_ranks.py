"""The layers of the built-in layout: longest path, then wrapped where a layer is too wide.

Owners go on the layer below everything that feeds them (longest path, with the
edges that close cycles reversed), and on or below any owner they are said to
follow (`EdgeSpec.order_only`: a stage whose data came through the driver, put
after the stage before it in the flow, not at the top). A layer wider than
`MAX_LAYER_PX` wraps onto the next layers, so a driver's fan-out to fourteen
stages stays inside a 1280-px window's graph panel instead of one wide row.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowmap.reporters.layout_records import NODE_GAP_PX

MAX_LAYER_PX = 640.0


def layer_ranks(
    order: list[str], flows: list[tuple[str, str]], back: set[tuple[str, str]],
    widths: dict[str, float] | None = None, after: Sequence[tuple[str, str, int]] = (),
    max_layer_px: float = MAX_LAYER_PX,
) -> dict[str, int]:
    """Each owner's layer (0 at the top). `flows` are the drawn edges, `back` those among
    them drawn upwards; `after`: (a, b, gap) puts b `gap` layers (0 or 1) or more below a;
    a layer wraps past `max_layer_px` of owners."""
    succ: dict[str, dict[str, int]] = {k: {} for k in order}  # u -> {v: least gap}
    for a, b in flows:
        u, v = (b, a) if (a, b) in back else (a, b)
        succ[u][v] = 1
    for a, b, gap in after:
        succ[a][b] = max(succ[a].get(b, 0), gap)
    indeg = dict.fromkeys(order, 0)
    for u in order:
        for v in succ[u]:
            indeg[v] += 1
    rank = dict.fromkeys(order, 0)
    pos = {k: i for i, k in enumerate(order)}
    ready = [k for k in order if indeg[k] == 0]
    while ready:
        u = ready.pop(0)
        for v in sorted(succ[u], key=pos.__getitem__):
            rank[v] = max(rank[v], rank[u] + succ[u][v])
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return rank if widths is None else _wrap(order, succ, rank, widths, max_layer_px)


def _wrap(order: list[str], succ: dict[str, dict[str, int]], rank: dict[str, int],
          widths: dict[str, float], max_layer_px: float) -> dict[str, int]:
    """Ranks again, top down, each owner on the first layer at or below its longest-path
    rank that has room for it (`max_layer_px`); its successors go below wherever it went."""
    preds: dict[str, list[tuple[str, int]]] = {k: [] for k in order}
    for u in order:
        for v, gap in succ[u].items():
            preds[v].append((u, gap))
    used: dict[int, float] = {}
    out: dict[str, int] = {}
    pos = {k: i for i, k in enumerate(order)}
    for k in sorted(order, key=lambda k: (rank[k], pos[k])):
        r = max([out[p] + gap for p, gap in preds[k] if p in out] + [rank[k]])
        while used.get(r, 0.0) and used[r] + NODE_GAP_PX + widths[k] > max_layer_px:
            r += 1
        used[r] = used.get(r, 0.0) + (NODE_GAP_PX if r in used else 0.0) + widths[k]
        out[k] = r
    return out
