"""A seam's leaves merged across its hops and folded steps into `LeafStats`.

Each schema is merged once, weighted by the hops that carried it; a leaf
whose shape varied gets a range per dimension.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flowmap.model.types import LeafStats, Shape
from flowmap.read.events import Leaf
from flowmap.read.fold import shape_range


@dataclass(slots=True)
class _LeafAcc:
    """A leaf being merged across hops; frozen into `LeafStats` once all are seen."""

    path: str
    kind: str
    dtypes: list[str]
    shape: Shape
    dims: tuple[str, ...] | None
    total_bytes: int
    max_bytes: int
    hops: int
    ranks: tuple[int, int] = (0, 0)  # least and largest number of dims seen

    def freeze(self) -> LeafStats:
        lo, hi = self.ranks
        return LeafStats(self.path, self.kind, tuple(self.dtypes), self.shape, self.dims,
                         self.total_bytes, self.max_bytes, self.hops,
                         (lo, hi) if lo != hi else None)


def leaf_stats(kept: Sequence[tuple[tuple[Leaf, ...], int]],
                folded: Mapping[int, tuple[tuple[Leaf, ...], int, list[int]]]
                ) -> tuple[LeafStats, ...]:
    acc: dict[str, _LeafAcc] = {}
    # Kept hops: each schema once, weighted by how many hops carried it (first-seen order:
    # deterministic for a given trace).
    for leaves, n in kept:
        for leaf in leaves:
            _merge_leaf(acc, leaf, n)
    # Folded steps: each leaf once per schema, with the hops and byte shares of every step
    # that carried it (merging is order-free but for first-seen values, and schemas keep
    # their first-seen order).
    for leaves, k, shares in folded.values():
        for leaf, share in zip(leaves, shares):
            _merge_leaf(acc, leaf, k, share)
    ranked = sorted(acc.values(), key=lambda ls: (-ls.total_bytes, ls.path))
    return tuple(a.freeze() for a in ranked)


def _merge_leaf(acc: dict[str, _LeafAcc], leaf: Leaf, n: int, total: int | None = None) -> None:
    """Add `n` hops of `leaf` (`total` bytes in all; default `n` times its size)."""
    cur = acc.get(leaf.path)
    shape: Shape = tuple(leaf.shape)
    total = leaf.nbytes * n if total is None else total
    if cur is None:
        acc[leaf.path] = _LeafAcc(
            path=leaf.path,
            kind=leaf.kind,
            dtypes=[leaf.dtype] if leaf.dtype else [],
            shape=shape,
            dims=tuple(leaf.dims) if leaf.dims else None,
            total_bytes=total,
            max_bytes=leaf.nbytes,
            hops=n,
            ranks=(len(shape), len(shape)),
        )
        return
    cur.total_bytes += total
    cur.max_bytes = max(cur.max_bytes, leaf.nbytes)
    cur.hops += n
    if leaf.dtype and leaf.dtype not in cur.dtypes:
        cur.dtypes = sorted(cur.dtypes + [leaf.dtype])
    if leaf.kind != cur.kind:
        cur.kind = "mixed"
    cur.shape = shape_range(cur.shape, shape)
    cur.ranks = (min(cur.ranks[0], len(shape)), max(cur.ranks[1], len(shape)))
    if cur.dims is None and leaf.dims:
        cur.dims = tuple(leaf.dims)
