"""The built-in layout: a small Sugiyama layered layout, for when Graphviz is not installed.

Steps, each a function below: choose the edges that close cycles (they are
drawn upwards), layer the owners by longest path, thread every edge through
dummy nodes (one of them holds its label, on a half layer of its own), order
each layer by barycentre sweeps keeping the order with the fewest crossings,
then place x by least squares under the spacing constraints (isotonic
regression) and straighten long edges. The result is a `Layout` like the one
read from `dot`, so the page cannot tell the engines apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowmap.reporters.layered_ranks import MAX_LAYER_PX, layer_ranks
from flowmap.reporters.layout_records import (
    MAX_OPEN_K,
    NODE_GAP_PX,
    PANEL_H_PX,
    PANEL_W_PX,
    RANK_GAP_PX,
    EdgeRoute,
    EdgeSpec,
    Layout,
    NodeSpec,
    Point,
)

#: Long edges may pass closer to their neighbours than owners do.
DUMMY_GAP_PX = 8.0
OWNER_HEIGHT_PX = 30.0  # the page's owner box at 1:1
#: The widths a layer of owners may wrap at, tried in turn (see `layered`).
WRAPS_PX = (MAX_LAYER_PX, 520.0, 420.0, 340.0, 260.0)
#: Past this many owners + edges, one try (each costs a whole layout).
WRAP_TRIES_MAX_ELEMENTS = 150
#: A narrower wrap is kept only if it opens this much larger.
WRAP_GAIN = 1.03


@dataclass(slots=True)
class _Item:
    """A node of the layered graph: an owner, or a dummy that carries a long edge (maybe its label)."""

    id: str
    width: float
    height: float
    rank: int = 0
    x: float = 0.0
    dummy: bool = False
    port: float = 0.0  # where the edge line passes, from x: a label dummy keeps its text right of it

    @property
    def line_x(self) -> float:
        return self.x + self.port


def layered(nodes: list[NodeSpec], all_edges: list[EdgeSpec], wrap: float | None = None) -> Layout:
    """The layout, its layers wrapped at `wrap` px of owners, else at the width (of `WRAPS_PX`)
    at which it opens largest in a 1280x800 window's graph panel. One width did not suit every
    graph: at 640 px,
    fifteen owners and 24 arrows made a layout three and a half times wider than tall, and
    a page that opened it at 0.4 had no room for a single arrow's label; wrapped at 520 px
    it opened at 0.77."""
    if wrap is not None:
        return _layered(nodes, all_edges, wrap)[0]
    best: tuple[float, Layout] | None = None
    tries = WRAPS_PX if len(nodes) + len(all_edges) <= WRAP_TRIES_MAX_ELEMENTS else WRAPS_PX[:1]
    seen: list[dict[str, int]] = []
    for width in tries:
        placed, ranks = _layered(nodes, all_edges, width)
        if ranks in seen:  # wrapped the same as a wider try
            continue
        seen.append(ranks)
        zoom = min(MAX_OPEN_K, PANEL_W_PX / max(1.0, placed.width), PANEL_H_PX / max(1.0, placed.height))
        if best is None or zoom > best[0] * WRAP_GAIN:
            best = (zoom, placed)
    assert best is not None
    return best[1]


def _layered(nodes: list[NodeSpec], all_edges: list[EdgeSpec], wrap: float
             ) -> tuple[Layout, dict[str, int]]:
    order = [n.id for n in nodes]
    # edges that only order their owners (none drawn): dst on src's layer or below
    after = [(e.src, e.dst, int(e.below)) for e in all_edges if e.order_only and e.src != e.dst]
    edges = [e for e in all_edges if not e.order_only]
    items = {n.id: _Item(n.id, n.width, n.height) for n in nodes}
    flows = [(e.src, e.dst) for e in edges if e.src != e.dst]
    given = [e for e in edges if e.src != e.dst]
    if given and all(e.back is not None for e in given):  # the caller knows the flow's order
        reversed_pairs = {(e.src, e.dst) for e in given if e.back}
    else:
        reversed_pairs = _feedback_edges(order, flows)
    # Ranks are doubled: owners sit on even ranks, so every edge spans at least one
    # odd (label) rank and gets a dummy there to hold its label, as dot does.
    # owners drawn larger (`flowmap.reporters.fit`) wrap at a proportionally wider layer
    grow = max((n.height for n in nodes), default=OWNER_HEIGHT_PX) / OWNER_HEIGHT_PX
    widths = {n.id: n.width / grow for n in nodes}
    rank = {k: 2 * r for k, r in layer_ranks(order, flows, reversed_pairs, widths, after, wrap).items()}
    for k, r in rank.items():
        items[k].rank = r
    chains: dict[str, list[str]] = {}
    links: list[tuple[str, str]] = []
    for e in edges:
        if e.src == e.dst:
            continue
        up, down = (e.dst, e.src) if (e.src, e.dst) in reversed_pairs else (e.src, e.dst)
        chain = [up]
        label_rank = rank[down] - 1  # next to the owner it feeds: wrapped layers keep their own labels
        for r in range(rank[up] + 1, rank[down]):
            dummy = _Item(f"{e.id}#{r}", 4.0, 4.0, r, dummy=True)
            if r == label_rank:
                dummy.width, dummy.height = e.label_width + 10.0, 13.0 * e.label_lines
                dummy.port = 5.0 - dummy.width / 2
            items[dummy.id] = dummy
            chain.append(dummy.id)
        chain.append(down)
        links += list(zip(chain, chain[1:]))
        chains[e.id] = chain
    layers = _order_layers(items, links, order, chains)
    _place_x(layers, items, links, chains)
    ys = _layer_ys(layers, items)
    return _routes(nodes, edges, items, chains, rank, reversed_pairs, ys), rank


def _feedback_edges(order: list[str], flows: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Edges drawn upwards: those that go back towards the sources (weight sync -> rollout).

    Nodes are ordered by breadth-first distance from the sources (then by
    `order`); an edge against that order closes a cycle. A pipeline reads as
    "distance from where the data enters", which DFS-based choices do not respect.
    """
    succ: dict[str, list[str]] = {k: [] for k in order}
    indeg = dict.fromkeys(order, 0)
    for a, b in flows:
        if b not in succ[a]:
            succ[a].append(b)
            indeg[b] += 1
    depth = {k: 0 for k in order if indeg[k] == 0}
    frontier = list(depth)
    while True:
        while frontier:
            nxt: list[str] = []
            for k in frontier:
                for v in succ[k]:
                    if v not in depth:
                        depth[v] = depth[k] + 1
                        nxt.append(v)
            frontier = nxt
        rest = [k for k in order if k not in depth]
        if not rest:
            break
        depth[rest[0]] = 0  # a cycle that no source reaches: enter it at its first node
        frontier = [rest[0]]
    seq = {k: (depth[k], i) for i, k in enumerate(order)}
    return {(a, b) for a, b in flows if seq[a] > seq[b]}


def _order_layers(
    items: dict[str, _Item], links: list[tuple[str, str]], order: list[str],
    chains: dict[str, list[str]] | None = None,
) -> list[list[str]]:
    """Barycentre sweeps down and up; keeps the ordering with the fewest crossings."""
    depth = max((it.rank for it in items.values()), default=0) + 1
    layers: list[list[str]] = [[] for _ in range(depth)]
    for k in items:  # owners in their given order, then dummies edge by edge
        layers[items[k].rank].append(k)
    # A dummy starts at the column of the owner its edge ends at, between the owners of its
    # layer: the edges into a wrapped layer then pass between the layer above's owners, and
    # the two layers share their width instead of standing side by side (ties keep this).
    column = {k: i for layer in layers for i, k in enumerate(k for k in layer if not items[k].dummy)}
    for chain in (chains or {}).values():
        for k in chain[1:-1]:
            column[k] = column[chain[-1]]
    layers = [sorted(layer, key=lambda k: (column[k], items[k].dummy)) for layer in layers]
    up: dict[str, list[str]] = {k: [] for k in items}
    down: dict[str, list[str]] = {k: [] for k in items}
    for a, b in links:
        down[a].append(b)
        up[b].append(a)
    best = [list(layer) for layer in layers]
    best_cost = _crossings(best, down)
    for sweep in range(24):
        rng = range(1, depth) if sweep % 2 == 0 else range(depth - 2, -1, -1)
        nbrs = up if sweep % 2 == 0 else down
        for r in rng:
            ref = layers[r - 1] if sweep % 2 == 0 else layers[r + 1]
            pos = {k: i for i, k in enumerate(ref)}
            layers[r] = _by_barycentre(layers[r], nbrs, pos)
        cost = _crossings(layers, down)
        if cost < best_cost:
            best, best_cost = [list(layer) for layer in layers], cost
        if best_cost == 0:
            break
    return best


def _by_barycentre(layer: list[str], nbrs: dict[str, list[str]], pos: dict[str, int]) -> list[str]:
    def key(ik: tuple[int, str]) -> tuple[float, int]:
        i, k = ik
        ps = [pos[n] for n in nbrs[k] if n in pos]
        return (sum(ps) / len(ps) if ps else float(i), i)

    return [k for _, k in sorted(enumerate(layer), key=key)]


def _crossings(layers: list[list[str]], down: dict[str, list[str]]) -> int:
    total = 0
    for r in range(len(layers) - 1):
        pos = {k: i for i, k in enumerate(layers[r + 1])}
        ends = [pos[b] for i, a in enumerate(layers[r]) for b in sorted(down[a], key=pos.__getitem__)]
        total += _inversions(ends)
    return total


def _inversions(xs: list[int]) -> int:
    """Pairs i < j with xs[i] > xs[j], by a Fenwick tree: O(n log n) for wide layers."""
    size = max(xs, default=0) + 2
    tree = [0] * (size + 1)
    count = 0
    for seen, x in enumerate(xs):
        i, below = x + 1, 0
        while i > 0:
            below += tree[i]
            i -= i & -i
        count += seen - below
        i = x + 1
        while i <= size:
            tree[i] += 1
            i += i & -i
    return count


def _place_x(
    layers: list[list[str]], items: dict[str, _Item], links: list[tuple[str, str]],
    chains: dict[str, list[str]],
) -> None:
    """Each item as near the weighted mean of its neighbours as order and spacing allow.

    Sweeps alternate down (pulled by the layer above) and up (by the layer
    below), then a last pass straightens each long edge's dummies where room allows.
    """
    # Gansner et al.'s weights: long edges (dummy to dummy) pull hardest, so they run straight.
    above: dict[str, list[tuple[str, float]]] = {k: [] for k in items}
    below: dict[str, list[tuple[str, float]]] = {k: [] for k in items}
    for a, b in links:
        da, db = items[a].dummy, items[b].dummy
        w = 1.0 + da + db + 6.0 * (da and db)
        below[a].append((b, w))
        above[b].append((a, w))
    for layer in layers:
        x = 0.0
        for k in layer:
            items[k].x = x + items[k].width / 2
            x += items[k].width + _gap(items[k], items[k])
    for sweep in range(16):
        down = sweep % 2 == 0
        for layer in layers if down else reversed(layers):
            targets = []
            for k in layer:
                ns = (above if down else below)[k] or above[k] + below[k]
                total = sum(w for _, w in ns)
                mean = sum(items[n].line_x * w for n, w in ns) / total if ns else items[k].line_x
                targets.append(mean - items[k].port)
            for k, x in zip(layer, _pack(layer, items, targets)):
                items[k].x = x
    _straighten(layers, items, chains)
    left = min((it.x - it.width / 2 for it in items.values()), default=0.0)
    for it in items.values():
        it.x -= left


def _straighten(layers: list[list[str]], items: dict[str, _Item], chains: dict[str, list[str]]) -> None:
    """Put a long edge's dummies on one vertical where that keeps the gaps to their neighbours."""
    slot: dict[str, tuple[list[str], int]] = {k: (layer, i) for layer in layers for i, k in enumerate(layer)}

    def fits(k: str, x: float) -> bool:
        layer, i = slot[k]
        half = items[k].width / 2
        left = layer[i - 1] if i > 0 else None
        right = layer[i + 1] if i + 1 < len(layer) else None
        it = items[k]
        ok_left = left is None or items[left].x + items[left].width / 2 + _gap(items[left], it) <= x - half
        ok_right = right is None or x + half + _gap(it, items[right]) <= items[right].x - items[right].width / 2
        return ok_left and ok_right

    for chain in chains.values():
        dummies = [k for k in chain if items[k].dummy]
        if len(dummies) < 2:
            continue
        xs = sorted(items[k].line_x for k in dummies)
        for x in (xs[len(xs) // 2], xs[0], xs[-1]):
            if all(fits(k, x - items[k].port) for k in dummies):
                for k in dummies:
                    items[k].x = x - items[k].port
                break


def _pack(layer: list[str], items: dict[str, _Item], targets: list[float]) -> list[float]:
    """Least-squares x for `targets` keeping order and gaps: isotonic regression (pool adjacent violators)."""
    offsets = [0.0]
    for a, b in zip(layer, layer[1:]):
        offsets.append(offsets[-1] + items[a].width / 2 + _gap(items[a], items[b]) + items[b].width / 2)
    blocks: list[list[float]] = []  # [mean, weight]
    for t, off in zip(targets, offsets):
        blocks.append([t - off, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2 = blocks.pop()
            m1, w1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2])
    ys = [m for m, w in blocks for _ in range(int(w))]
    return [y + off for y, off in zip(ys, offsets)]


def _gap(a: _Item, b: _Item) -> float:
    return DUMMY_GAP_PX if a.dummy or b.dummy else NODE_GAP_PX


def _layer_ys(layers: list[list[str]], items: dict[str, _Item]) -> list[float]:
    ys, y = [], 8.0
    for layer in layers:
        h = max((items[k].height for k in layer), default=0.0)
        ys.append(y + h / 2)
        y += h + RANK_GAP_PX / 2
    return ys


def _routes(
    nodes: list[NodeSpec],
    edges: list[EdgeSpec],
    items: dict[str, _Item],
    chains: dict[str, list[str]],
    rank: dict[str, int],
    back: set[tuple[str, str]],
    ys: list[float],
) -> Layout:
    pad = 8.0
    width = max((it.x + it.width / 2 for it in items.values()), default=0.0) + 2 * pad + 40
    height = (ys[-1] + max((n.height for n in nodes), default=0.0) / 2 + pad) if ys else 2 * pad
    out = Layout("layered", round(width, 1), round(height, 1))
    for n in nodes:
        out.nodes[n.id] = (round(items[n.id].x + pad, 1), round(ys[rank[n.id]], 1))
    for e in edges:
        if e.src == e.dst:
            out.edges[e.id] = _self_loop(items[e.src], ys[rank[e.src]], pad, e)
            continue
        chain = chains[e.id]
        pts = []
        label: Point | None = None
        for k in chain:
            it = items[k]
            x, y = it.x + pad, ys[it.rank]
            if it.port:  # the label dummy: line on its left, text right
                label = (round(x + 5.0, 1), round(y, 1))
            pts.append((x + it.port, y))
        if (e.src, e.dst) in back:
            pts.reverse()
        src_h = items[e.src].height / 2
        dst_h = items[e.dst].height / 2
        down = pts[-1][1] > pts[0][1]
        pts[0] = (pts[0][0], pts[0][1] + (src_h if down else -src_h))
        pts[-1] = (pts[-1][0], pts[-1][1] - (dst_h if down else -dst_h))
        out.edges[e.id] = EdgeRoute(_smooth(pts), label or _mid(pts))
    return out


def _smooth(pts: list[Point]) -> list[Point]:
    """A polyline through layers as a Bezier with vertical tangents at every layer."""
    out = [_r(pts[0])]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        dy = (y1 - y0) / 2
        out += [_r((x0, y0 + dy)), _r((x1, y1 - dy)), _r((x1, y1))]
    return out


def _self_loop(it: _Item, y: float, pad: float, e: EdgeSpec) -> EdgeRoute:
    x = it.x + pad + it.width / 2
    h = it.height / 3
    pts = [(x, y - h), (x + 30, y - h - 10), (x + 30, y + h + 10), (x, y + h)]
    return EdgeRoute([_r(p) for p in pts], _r((x + 34 + e.label_width / 2, y)))


def _mid(pts: list[Point]) -> Point:
    (x0, y0), (x1, y1) = pts[len(pts) // 2 - 1], pts[len(pts) // 2]
    return _r(((x0 + x1) / 2, (y0 + y1) / 2))


def _r(p: Point) -> Point:
    return (round(p[0], 1), round(p[1], 1))
