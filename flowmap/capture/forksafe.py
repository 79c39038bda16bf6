"""Locks that a forked child gets released, and the fork policy in one place.

`fork()` copies one thread, the caller, and every lock as it stands. A lock that
another thread held at that moment stays held forever in the child: the thread that
would release it does not exist there. vLLM, Ray, DataLoader workers and
multiprocessing's fork start method all fork from processes that have threads, so
every lock that capture shares between threads comes from `lock()`, and the child
gets it back released, as the standard library does for its own (`logging`,
`threading`). State that such a lock guards is either per process (the tracer, made
anew in the child at its first event) or updated in single steps under the GIL, so a
released lock over it is consistent.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

_locks: weakref.WeakSet[Any] = weakref.WeakSet()


def lock(*, reentrant: bool = False) -> Any:
    """A new `threading.Lock` (or `RLock`) that a forked child finds released."""
    made = threading.RLock() if reentrant else threading.Lock()
    _locks.add(made)
    return made


def _release_in_child() -> None:
    for held in list(_locks):
        try:
            held._at_fork_reinit()  # what logging and threading call on theirs
        except Exception:
            pass


os.register_at_fork(after_in_child=_release_in_child)
