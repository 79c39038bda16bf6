"""Folding sequences: one `[*]` path per field, sampled and extrapolated when long.

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
from itertools import repeat
from operator import is_, itemgetter
from typing import Any

from flowmap.capture.describers.walk import (
    HARD_NODES,
    MAX_DEPTH,
    MAX_LEAVES,
    SOFT_NODES,
    Leaf,
    Shape,
    Walk,
    space_total,
    utf8_len,
    visit,
)

MAX_LIST_SCAN = 2048

NUMBER_TYPES: list[tuple[type, str, int]] = [(int, "int", 8), (float, "float", 8), (bool, "bool", 1),
                                         (complex, "complex", 16)]


def scalar_of(t: type) -> tuple[str, int] | None:
    """(kind, bytes) of a Python number type, by identity (no hashing of `t`)."""
    for st, kind, size in NUMBER_TYPES:
        if t is st:
            return kind, size
    return None


def fold(w: Walk, n: int, item_at: Callable[[int], Any], path: str, depth: int,
         sample_from: int | None = None, items: list[Any] | tuple[Any, ...] | None = None) -> None:
    """Fold `n` elements into `[*]` leaves: one per field path, with count and summed bytes.

    `items`, an exact list or tuple, lets a sequence of strings or of lists of
    numbers be read whole at C speed (`uniform`).
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
    if items is not None and uniform(w, items, first, star, depth):
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


def uniform(w: Walk, items: list[Any] | tuple[Any, ...], first: Any, star: str, depth: int) -> bool:
    """Fold a sequence of exact strs, or of non-empty exact lists of one number type, in C-level
    passes; False (nothing done) for anything else. Trajectories carry these (the expected
    answers, the tokens of each turn): sampled one by one they cost a microsecond an element.

    The leaf, the bytes and the walked nodes are what `sample` would give, which it does only
    when the node budget lets it walk every element: one node per element here too.
    """
    n = len(items)
    if n > MAX_LIST_SCAN or n > SOFT_NODES - w.nodes:
        return False
    t = type(first)
    if t is str:
        if not all(map(is_, map(type, items), repeat(str))):
            return False
        lens = list(map(str.__len__, items))
        nbytes = sum(lens) if all(map(str.isascii, items)) else sum(map(utf8_len, items))
        kind, count = "str", n
    elif t is list and depth + 1 < MAX_DEPTH:
        if not all(map(is_, map(type, items), repeat(list))) or not all(items):
            return False
        number = type(first[0])
        scalar = scalar_of(number)
        ids = set(map(id, items))
        if scalar is None or len(ids) < n or not w.seen.isdisjoint(ids) or not all(
                all(map(is_, map(type, map(itemgetter(end), items)), repeat(number)))
                for end in (0, -1)):
            return False  # a list met twice is a `ref`; mixed types merge as `mixed`
        w.seen.update(ids)
        lens = list(map(list.__len__, items))
        count = sum(lens)
        kind, nbytes = scalar[0], scalar[1] * count
        star += "[*]"
    else:
        return False
    lo, hi = min(lens), max(lens)
    w.nodes += n
    w.leaf(star, kind, (lo if lo == hi else (lo, hi),), "", nbytes, count)
    return True


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
