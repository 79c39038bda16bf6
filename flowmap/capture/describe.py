"""Describe a payload as leaves, from metadata alone.

This runs inside the user's program on every hop, so it is written for speed
and for safety: it never reads tensor data (no `.cpu()`, `.tolist()`, pickling),
never copies, never calls the user's code (no `__getattr__`, `__len__`,
`__torch_function__`, `__format__`...: see `describers/introspect.py`), and never
lets an exception from a hostile object escape. Every walk is bounded in depth,
leaves, walked nodes and schema size, so a hop costs at most a fixed amount
whatever the payload; lists are folded into one `[*]` path per field so a
batch of 64 trajectories has the same schema as a batch of 65 — which keeps
traces small (schemas are interned) and makes baselines comparable.

A leaf is a plain tuple, cheap to build and to hash for interning:

    (path, kind, shape, dtype, device, nbytes, count, dims)

`shape` is a tuple of ints; for folded lists a dim that varied between
elements is a `(min, max)` pair. `count` is how many objects the leaf stands
for (1 for a plain leaf). How each type is sized: docs/capture.md.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from flowmap.capture.describers import columns, torch_, walk
from flowmap.capture.describers.containers import walk_dict
from flowmap.capture.describers.walk import (
    FAST,
    MAX_DEPTH,
    MAX_LEAVES,
    Leaf,
    Walk,
    space_total,
    visit,
)

__all__ = ["MAX_DEPTH", "MAX_LEAVES", "MAX_LIST_SCAN", "MAX_SCHEMA_CHARS", "Description", "Leaf",
           "describe"]

MAX_LIST_SCAN = columns.MAX_LIST_SCAN
# Path characters per schema: past this, the remaining leaves are dropped (their
# bytes still count), so no payload writes an unbounded schema line.
MAX_SCHEMA_CHARS = 32_768


class Description(Walk):
    """The result of describing one payload: the walk's own state, plus its total bytes.

    `leaves`; `nbytes` (views counted once); `storages`, one (data_ptr, address
    space) per array leaf that stands for one object (not folded from a list),
    in leaf order, so later analysis can tell a reference (same storage) from a
    copy; `nodes`, the objects walked (the cost bound the tests check). The walk
    is returned as the result to spare an object per hop.
    """

    __slots__ = ("nbytes",)
    nbytes: int


_torch: list[Any] = []  # [mode-enabled check, guard] once torch is imported


def describe(payload: Any, dims: Mapping[str, tuple[str, ...]] | None = None) -> Description:
    """Describe `payload`; bytes of views that share a storage are counted once."""
    w = Description(dims)
    if not _torch and "torch" in sys.modules:
        _bind_torch()
    if _torch and _torch[0]():
        # A TorchFunctionMode (the user's, or `with torch.device(...)`) would
        # see every metadata read: turn torch-function dispatch off meanwhile.
        with _torch[1]():
            visit(w, payload, "", 0)
    elif type(payload) is dict:  # the common hop, two calls less
        w.nodes = 1
        w.seen.add(id(payload))
        (FAST[0] or walk_dict)(w, payload, "", 0)
    else:
        visit(w, payload, "", 0)
    if len(w.leaves) > 64:
        w.leaves = _bounded_schema(w.leaves)
    nbytes = w.plain
    disjoint_total = walk.disjoint_total  # read here: the tests turn the C loops off
    for pieces in w.pieces.values():
        # `space_total`'s common case (disjoint storages, counted in C), without its frame
        total = disjoint_total(pieces) if disjoint_total is not None else None
        nbytes += space_total(pieces) if total is None else total
    w.nbytes = nbytes
    return w


def _bind_torch() -> None:
    try:
        _torch.extend(torch_.bind())
    except Exception:  # torch half-imported (another thread is importing it): next time
        del _torch[:]


def _bounded_schema(leaves: list[Leaf]) -> list[Leaf]:
    chars = 0
    for i, leaf in enumerate(leaves):
        chars += len(leaf[0]) + len(leaf[3]) + 32
        if chars > MAX_SCHEMA_CHARS:
            return leaves[:i]
    return leaves
