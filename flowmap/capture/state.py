"""Process-wide capture state: the one flag every public call checks first.

Kept in a module of its own so the hot path is a single attribute load
(`state.tracer is None` means "not tracing", and every API call returns).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flowmap.capture.tracer import Tracer

tracer: Tracer | None = None

# The owner of the code that is running. A context variable, so threads and
# asyncio tasks each keep their own; `default_owner` covers threads that never
# set one (a new thread starts with an empty context).
current_owner: ContextVar[str | None] = ContextVar("flowmap_owner", default=None)
default_owner: str = "main"
# True while `default_owner` is one flowmap chose for a multiprocessing child (its target's
# name): `init_process_group` may still make it `rank<N>`; `set_owner` makes it False.
auto_owner: bool = False

# Called once, at the program's first use of the capture API other than `hop` (an owner, a
# seam, a step...): the program is instrumented, so `flowmap trace` with no map stops looking
# for seams of its own (flowmap/discover/auto.py). None when nobody is watching.
on_declared: Callable[[], None] | None = None


def declared() -> None:
    """The program used the capture API: tell the watch, once."""
    global on_declared
    hook, on_declared = on_declared, None
    if hook is not None:
        try:
            hook()
        except Exception:  # never into the user's program
            pass
