"""Process-wide capture state: the one flag every public call checks first.

Kept in a module of its own so the hot path is a single attribute load
(`state.tracer is None` means "not tracing", and every API call returns).
"""

from __future__ import annotations

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
