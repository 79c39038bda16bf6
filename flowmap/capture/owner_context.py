"""The owner of the code that is running, as a context variable of its own module.

`flowmap.capture.state` holds the process's capture state and names the tracer; the
tracer reads the owner at each hop (a thread that runs in no block: `StorageTable.acted`)
and cannot import that state back. Threads and asyncio tasks each keep their own value;
`state.default_owner` covers threads that never set one (a new thread starts with an
empty context).
"""

from __future__ import annotations

from contextvars import ContextVar

current_owner: ContextVar[str | None] = ContextVar("flowmap_owner", default=None)
