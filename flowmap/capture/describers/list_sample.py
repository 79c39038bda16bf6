"""Lists described by sample: one `[*]` path per field, sampled and extrapolated when long.

Walking every element of a 100k-element list on every hop would make capture
the bottleneck, and a batch of 64 should share its schema with a batch of 65.
So a sequence's elements are merged by path (counts and bytes add up, shapes
become `[min, max]` ranges), and at most `MAX_LIST_SCAN` of them are walked —
fewer when the payload's node budget runs low: the first element's cost says
how many fit. The sample is spread evenly; its bytes are scaled to all
elements, while its arrays still join the hop's pieces so views count once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowmap.capture.describers import columns as _columns
from flowmap.capture.describers.columns import MAX_LIST_SCAN, scalar_of
from flowmap.capture.describers.walk import (
    HARD_NODES,
    MAX_LEAVES,
    SOFT_NODES,
    Leaf,
    Shape,
    Walk,
    space_total,
    visit,
)


def sample_list(w: Walk, n: int, item_at: Callable[[int], Any], path: str, depth: int,
                sample_from: int | None = None,
                items: list[Any] | tuple[Any, ...] | None = None) -> None:
    """Describe `n` elements as `[*]` leaves: one per field path, with count and summed bytes.

    `items`, an exact list or tuple, lets elements that share one shape be read
    column by column (`columns.py`) instead of one by one.
    """
    star = f"{path}[*]"
    if n == 0:
        w.add((star, "empty", (0,), "", "", 0, 0, None))
        return
    first = item_at(0)
    scalar = scalar_of(type(first))
    if scalar is not None and type(item_at((sample_from or n) - 1)) is type(first):
        # Lists of numbers (token ids, rewards) are sized by their length:
        # walking each one would cost a microsecond per element.
        w.leaf(star, scalar[0], (n,), "", scalar[1] * n, n)
        return
    if items is not None and _columns.columns(w, items, star, depth):
        return
    merged, _ = sample(w, n, item_at, star, depth, sample_from)
    for leaf in merged:
        w.add(leaf)


def sample(w: Walk, n: int, item_at: Callable[[int], Any], path: str, depth: int,
           sample_from: int | None = None) -> tuple[list[Leaf], int]:
    """Walk a sample of `n` elements at `path`; (merged leaves, bytes of all n, estimated).

    The first element's cost (in walked nodes) sets how many more the budget
    allows; the sample is spread evenly over the elements. The sample's bytes
    are kept apart while it is walked, so they can be scaled to all `n`; its
    array pieces then join the hop's, so views are still counted once.
    """
    avail = sample_from or n
    saved = w.leaves, w.full, w.folded, w.pieces, w.plain
    w.folded, w.pieces, w.plain = True, {}, 0
    acc: dict[str, Leaf] = {}
    before = w.nodes
    scanned, k = 0, 1
    while scanned < k and (scanned == 0 or w.nodes < HARD_NODES):
        w.leaves, w.full = [], False
        visit(w, item_at(scanned * avail // k), path, depth + 1)
        _merge_into(acc, w.leaves)
        scanned += 1
        if scanned == 1:
            cost = max(1, w.nodes - before)
            k = min(avail, MAX_LIST_SCAN, max(1, (SOFT_NODES - w.nodes) // cost + 1))
    pieces, plain = w.pieces, w.plain
    extra = 0
    if scanned < n:
        extra = int((plain + sum(map(space_total, pieces.values()))) * (n / scanned - 1))
    w.leaves, w.full, w.folded, w.pieces, w.plain = saved
    w.plain += plain + extra
    for space, ps in pieces.items():
        outer = w.pieces.get(space)
        if outer is None:
            w.pieces[space] = ps
        else:
            outer.extend(ps)
    merged = list(acc.values())
    if scanned < n:
        scale = n / scanned
        merged = [leaf[:5] + (int(leaf[5] * scale), int(leaf[6] * scale), leaf[7])
                  for leaf in merged]
    return merged, sum(leaf[5] for leaf in merged)


def _merge_into(by_path: dict[str, Leaf], leaves: list[Leaf]) -> None:
    """Merge leaves of equal path: counts and bytes add up, shapes become ranges."""
    for leaf in leaves:
        prev = by_path.get(leaf[0])
        if prev is None:
            if len(by_path) < MAX_LEAVES:
                by_path[leaf[0]] = leaf
            continue
        kind, shape, dtype = prev[1], prev[2], prev[3]
        by_path[leaf[0]] = (
            prev[0],
            kind if kind == leaf[1] else "mixed",
            shape if shape == leaf[2] else _merge_shape(shape, leaf[2]),
            dtype if dtype == leaf[3] else "mixed",
            prev[4], prev[5] + leaf[5], prev[6] + leaf[6], prev[7],
        )


def _merge_shape(a: Shape, b: Shape) -> Shape:
    """Two different shapes as one: each dim that differs becomes its (min, max) range."""
    if len(a) != len(b):
        return ()
    out = []
    for x, y in zip(a, b):
        if x == y:
            out.append(x)
            continue
        lo_x, hi_x = (x, x) if isinstance(x, int) else x
        lo_y, hi_y = (y, y) if isinstance(y, int) else y
        lo, hi = min(lo_x, lo_y), max(hi_x, hi_y)
        out.append(lo if lo == hi else (lo, hi))
    return tuple(out)
