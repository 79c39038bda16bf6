"""The C twins of the hot loops of a hop (`cwalk.c`, `ccolumns.c`), or None where not built.

`pip install` compiles them when a C compiler is there; without one the build
skips them and capture runs the Python loops, which stay the reference (the
tests compare the two). `FLOWMAP_PURE_PYTHON=1` turns the C loops off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowmap import environment

tensor_entries: Callable[..., tuple[int, int]] | None = None
disjoint_total: Callable[[list[tuple[int, int, int]]], int | None] | None = None
array_data: Callable[[Any, type], int | None] | None = None
fold_columns: Callable[..., tuple[list[Any], int, int, list[int], int, int] | None] | None = None
configure_columns: Callable[..., None] | None = None

if not environment.pure_python():
    try:
        from flowmap.capture.describers import cwalk
    except ImportError:  # not built (no compiler at install), or built for another Python
        pass
    else:
        tensor_entries = cwalk.tensor_entries
        disjoint_total = cwalk.disjoint_total
        array_data = getattr(cwalk, "array_data", None)  # None in a build older than it
    try:
        from flowmap.capture.describers import ccolumns
    except ImportError:
        pass
    else:
        fold_columns = ccolumns.fold_columns
        configure_columns = ccolumns.configure

__all__ = ["array_data", "configure_columns", "disjoint_total", "fold_columns", "tensor_entries"]
