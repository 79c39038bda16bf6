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

import _thread
import os
import threading
import weakref
from collections.abc import Callable
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


def at_fork(*, before: Callable[[], None] | None = None,
            after_in_parent: Callable[[], None] | None = None,
            after_in_child: Callable[[], None] | None = None) -> None:
    """`os.register_at_fork`, each hook handing on a Ctrl-C that lands in it.

    A signal that arrives during `fork()` runs its Python handler at the first Python
    instruction after it, which may be one of these hooks. CPython prints an exception
    raised in a fork hook ("Exception ignored in ...") and goes on: the program's
    KeyboardInterrupt would be lost, and a loop that forks DataLoader workers run on
    after Ctrl-C. The hook asks for it again instead, from a thread of its own: asked
    from inside the hook, it would land in the hooks again."""
    hooks = {"before": before, "after_in_parent": after_in_parent,
             "after_in_child": after_in_child}
    os.register_at_fork(**{k: _handing_on(f) for k, f in hooks.items() if f is not None})


def _handing_on(hook: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            hook()
        except KeyboardInterrupt:  # raised again once the hooks are done, where the program
            _thread.start_new_thread(_thread.interrupt_main, ())  # runs next: not in here

    return run


at_fork(after_in_child=_release_in_child)
