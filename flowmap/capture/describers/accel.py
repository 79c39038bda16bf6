"""The C twins of the two hot loops of a hop (`_walk.c`), or None where they are not built.

`pip install` compiles `_walk.c` when a C compiler is there; without one the
build skips it and capture runs the Python loops, which stay the reference (the
tests compare the two). `FLOWMAP_PURE_PYTHON=1` turns the C loops off.
"""

from __future__ import annotations

import os
from collections.abc import Callable

tensor_entries: Callable[..., tuple[int, int]] | None = None
disjoint_total: Callable[[list[tuple[int, int, int]]], int | None] | None = None

if not os.environ.get("FLOWMAP_PURE_PYTHON"):
    try:
        from flowmap.capture.describers import _walk
    except ImportError:  # not built (no compiler at install), or built for another Python
        pass
    else:
        tensor_entries = _walk.tensor_entries
        disjoint_total = _walk.disjoint_total

__all__ = ["disjoint_total", "tensor_entries"]
