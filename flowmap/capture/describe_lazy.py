"""`describe`, imported at the first hop rather than at start-up.

Every Python child of a traced run starts a tracer; one that never records a
hop (a resource tracker, a compile worker) should not pay for importing the
describers. The tracer calls `describe_lazy.describe`, which is the real
`describe` from its first call on.

A lazy import must be fork-safe: a child forked while another thread is inside
it inherits the import's module lock, held by a thread the child does not have,
and its own first hop would wait on that lock forever. So the import runs under
`_gate`, and a fork waits for the gate (the import under way finishes in the
parent first) and holds it across `fork()`: no child is ever born in the middle
of the import, and a process that never hops still never imports the describers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from flowmap.capture import forksafe

if TYPE_CHECKING:
    from flowmap.capture.describe import Description

# A fork waits this long for an import under way in another thread (it takes
# milliseconds); past it the fork goes on, and the child describes nothing.
FORK_WAIT_S = 30.0

_gate = threading.Lock()
_gate_held_for_fork = False


def _first(payload: Any, dims: Mapping[str, tuple[str, ...]] | None = None) -> Description:
    """Import the describers, put the real `describe` in this one's place, describe."""
    return load()(payload, dims)


def load() -> Callable[[Any, Mapping[str, tuple[str, ...]] | None], Description]:
    """The real `describe`, imported (under the gate) if it is not yet."""
    global describe
    with _gate:
        from flowmap.capture.describe import describe as loaded

        describe = loaded
    return loaded


def _cut_by_fork(payload: Any, dims: Mapping[str, tuple[str, ...]] | None = None) -> Description:
    """A child forked while the describers were still being imported (past `FORK_WAIT_S`):
    importing them here could wait forever, so each hop fails, and is counted, instead."""
    raise RuntimeError("this process was forked while another thread imported flowmap's "
                       "describers; its payloads are not described")


def _before_fork() -> None:
    global _gate_held_for_fork
    if describe is _first:  # not loaded yet: no import may be under way at the fork
        _gate_held_for_fork = _gate.acquire(timeout=FORK_WAIT_S)


def _after_fork_in_parent() -> None:
    global _gate_held_for_fork
    if _gate_held_for_fork:
        _gate_held_for_fork = False
        _gate.release()


def _after_fork_in_child() -> None:
    global _gate_held_for_fork, describe
    if _gate_held_for_fork:
        _gate_held_for_fork = False
        _gate.release()  # taken by this thread, the one the child runs on
    elif describe is _first:
        describe = _cut_by_fork


describe: Callable[[Any, Mapping[str, tuple[str, ...]] | None], Description] = _first

forksafe.at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                 after_in_child=_after_fork_in_child)
