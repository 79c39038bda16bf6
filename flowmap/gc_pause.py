"""Pause the cyclic GC while building many records that hold no cycles.

With a million hops alive, every generation-2 pass walks them all; reading
a large run spent most of its time there. Reading, aggregating, the view,
findings and the Perfetto writer all build such records, so the pause lives
at the bottom where each of them can reach it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic GC off inside the block, back to how it was after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def without_gc(fn: Callable[P, T]) -> Callable[P, T]:
    """`fn` run inside `paused_gc()`."""
    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with paused_gc():
            return fn(*args, **kwargs)

    return wrapper
