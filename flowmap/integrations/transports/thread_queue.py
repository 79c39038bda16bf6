"""Hops between threads and tasks through `queue.Queue` and `asyncio.Queue`: the in-process seams.

A pipeline in one process (a rollout thread filling a queue, a collector grouping what
it takes, a trainer thread draining the groups; or asyncio tasks doing the same) hands
its data over by reference, through a queue, with no flowmap call. Without this its
run records nothing, however clearly its stages are named.

- `put` (and `put_nowait`) called from the program's own code notes who put the object,
  when and in which step; nothing is described yet. A put by the standard library or an
  installed package (a logging `QueueHandler`) is theirs, not a seam of the program; nor
  is a put of `None`, the usual "no more" sentinel, which carries no data; nor the put
  of an object this thread has just recorded with `flowmap.hop` (that hop is told).
- `get` (and `get_nowait`) takes the note back. When the getter is another owner than
  the putter, the object is described then and recorded as a `ref` hop, putter -> getter,
  as `flowmap.hop` records one: the same object moved, so no bytes were copied, and its
  storages keep their ids (a collector that regroups a rollout's tensors hands the
  rollout's data on). A hand-off within one owner records nothing (a scratch queue of
  one stage): its note and look-up are all it costs.
- A thread's owner is its `flowmap.owner`/`set_owner`; else, for a thread the program
  started, its name (`Thread(name="rollout")`), its target's (`Thread(target=rollout)`)
  or its class's (a subclass with its own `run`), as a multiprocessing child is named
  (`flowmap.integrations.processes`). An asyncio task the program started is named so
  too: its name (`create_task(..., name="rollout")`) or its coroutine's. A thread or task
  the standard library or an installed package started, and the main thread, keep the
  process's owner.

The notes are kept per queue (a weak key: a queue dropped with objects in it takes
their notes along) and hold the object, so a note is taken back only by the very object
it was made for, never by a later one at a freed address. An object taken off
`Queue.queue` directly, not by `get`, leaves its note until the queue goes.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from flowmap.capture import forksafe, item_tags, state
from flowmap.integrations.transports import record

MAX_NOTES = 10_000  # notes kept per queue at most: a queue filled and never drained
_LIBRARY_DIRS = ("site-packages", "dist-packages")

# queue -> id(object) -> [(object, t_ns, owner, step)]: the puts not taken yet
_notes: weakref.WeakKeyDictionary[Any, dict[int, list[tuple[Any, int, str, int | None]]]] = \
    weakref.WeakKeyDictionary()
_lock = forksafe.lock()  # a child forked while another thread held it finds it released
_roles: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()  # thread/task
_installed: set[str] = set()
_QUEUE_FILES: set[str] = set()  # the patched modules' own files: their frames are skipped
_library_files: dict[str, bool] = {}
# (owner, whether the program called) of the asyncio `put`/`get` running in this context
_caller: ContextVar[tuple[str, bool] | None] = ContextVar("flowmap_queue_caller", default=None)
# flowmap's own code, the wrappers of the queues' methods included (the built-in trainer is
# a program: checked out, trainer/ lies beside this folder; installed, in site-packages)
_FLOWMAP_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def install_queue(module: Any) -> None:
    """Patch `queue.Queue` (its `LifoQueue` and `PriorityQueue` too); idempotent."""
    _install(module, "put", "get")


def install_asyncio(module: Any) -> None:
    """Patch `asyncio.queues.Queue` (`put` and `get` end in the `_nowait` ones); idempotent.
    `put` and `get` themselves are wrapped to know who called them: awaited in a task of
    their own (`wait_for(q.get(), 1)`, `create_task(q.get())`, `gather`), the `_nowait`
    call runs in a task the standard library made, not in the caller's."""
    if module.__name__ not in _installed:
        module.Queue.put = _wrap_coroutine(module.Queue.put)
        module.Queue.get = _wrap_coroutine(module.Queue.get)
    _install(module, "put_nowait", "get_nowait")


def _install(module: Any, put: str, get: str) -> None:
    if module.__name__ in _installed:
        return
    _installed.add(module.__name__)
    _QUEUE_FILES.add(getattr(module, "__file__", "") or "")
    setattr(module.Queue, put, _wrap_put(getattr(module.Queue, put)))
    setattr(module.Queue, get, _wrap_get(getattr(module.Queue, get)))


def _wrap_coroutine(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`asyncio.Queue.put` or `get`, made to run as its caller: who called it, and whether
    the program did, are taken when it is called and held while it runs (`_caller`)."""

    @functools.wraps(fn)
    def flowmap_coroutine(self: Any, *args: Any, **kwargs: Any) -> Any:
        coro = fn(self, *args, **kwargs)
        if state.tracer is None:
            return coro
        try:  # a library's own awaits (an engine's output queues) pay this check alone
            if not _program_call(sys._getframe(1)):
                return coro
            caller = (owner_here(), True)
        except Exception as exc:
            record.error(exc)
            return coro
        return _as_caller(coro, caller)

    aio = sys.modules.get("asyncio")  # still a coroutine function to asyncio's own check
    flowmap_coroutine._is_coroutine = getattr(  # type: ignore[attr-defined]
        getattr(aio, "coroutines", None), "_is_coroutine", None)
    mark = getattr(inspect, "markcoroutinefunction", None)  # Python 3.12+
    return mark(flowmap_coroutine) if mark is not None else flowmap_coroutine


async def _as_caller(coro: Any, caller: tuple[str, bool]) -> Any:
    token = _caller.set(caller)
    try:
        return await coro
    finally:
        _caller.reset(token)


def _wrap_put(put: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(put)
    def flowmap_put(self: Any, item: Any, *args: Any, **kwargs: Any) -> Any:
        entry = None
        if state.tracer is not None and item is not None:
            try:  # noted before it is in: a consumer may take it before `put` returns
                caller = _caller.get()
                program = caller[1] if caller is not None else _program_call(sys._getframe(1))
                if program and not state.hopped_last(item):
                    entry = _note(self, item, owner_here())
            except Exception as exc:
                record.error(exc)
        if entry is None:
            return put(self, item, *args, **kwargs)
        try:
            return put(self, item, *args, **kwargs)
        except BaseException:  # `Full`, or interrupted: nothing was put
            _forget(self, item, entry)
            raise

    return flowmap_put


def _wrap_get(get: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(get)
    def flowmap_get(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = get(self, *args, **kwargs)
        if state.tracer is not None:
            try:
                _took(self, out)
            except Exception as exc:
                record.error(exc)
        return out

    return flowmap_get


def _note(queue: Any, item: Any, owner: str) -> tuple[Any, int, str, int | None]:
    entry = (item, record.now_ns(), owner, _step())
    with _lock:
        notes = _notes.get(queue)
        if notes is None:
            notes = _notes[queue] = {}
        elif len(notes) >= MAX_NOTES:
            notes.clear()  # a queue nobody drains: its oldest notes go, never the program's data
        notes.setdefault(id(item), []).append(entry)
    return entry


def _taken(queue: Any, item: Any) -> tuple[Any, int, str, int | None] | None:
    """The oldest note of `item` on `queue`, taken off; None if there is none. The notes of
    one id all hold the one object alive at that id, so the first is the oldest."""
    with _lock:
        notes = _notes.get(queue)
        if notes is None:
            return None
        entries = notes.get(id(item))
        if not entries or entries[0][0] is not item:
            return None  # put before tracing started, or its note was let go
        entry = entries.pop(0)
        if not entries:
            del notes[id(item)]
    return entry


def _forget(queue: Any, item: Any, entry: tuple[Any, int, str, int | None]) -> None:
    try:
        with _lock:
            notes = _notes.get(queue) or {}
            entries = notes.get(id(item)) or []
            for i, e in enumerate(entries):
                if e is entry:
                    del entries[i]
                    break
            if not entries:
                notes.pop(id(item), None)
    except Exception as exc:
        record.error(exc)


def _took(queue: Any, item: Any) -> None:
    entry = _taken(queue, item)
    if entry is None:
        return
    _, _, src, step = entry
    dst = owner_here()
    t = state.tracer
    if src != dst and t is not None:
        t.hop(src, dst, item, type(item).__name__, item_tags.take(item) or (), step, None,
              "ref", None)


def owner_here() -> str:
    """The owner of the code running now: the caller of the asyncio `put`/`get` under way
    (`_caller`), else `flowmap.capture.api.current_owner`, else the role of the task or
    thread the program started it in."""
    caller = _caller.get()
    if caller is not None:
        return caller[0]
    owner = state.current_owner.get()
    if owner:
        return owner
    aio = sys.modules.get("asyncio")
    task = _current_task(aio) if aio is not None else None
    if task is not None and (role := _role(task, task_role)):
        return role
    thread = threading.current_thread()
    if thread is threading.main_thread():
        return state.default_owner
    return _role(thread, role_of) or state.default_owner


def _role(runner: Any, of: Callable[[Any], str | None]) -> str | None:
    """`of(runner)`, kept per thread or task while it lives."""
    try:
        return _roles[runner]
    except KeyError:
        role = _roles[runner] = of(runner)
        return role
    except TypeError:  # one that cannot be weakly referenced: not kept
        return of(runner)


def role_of(thread: threading.Thread) -> str | None:
    """The role of a thread the program started: its given name, else its target's or its
    class's; None for one started by the standard library or an installed package."""
    target = getattr(thread, "_target", None)
    while isinstance(target, functools.partial):
        target = target.func
    function: Any = getattr(target, "__func__", target)
    while hasattr(function, "__wrapped__"):  # a wrapper (flowmap's own, of `Queue.put`)
        function = function.__wrapped__
    code = getattr(function, "__code__", None)
    if code is None and type(thread).run is not threading.Thread.run:
        code = getattr(type(thread).run, "__code__", None)
    if code is None or _library_code(code.co_filename):
        return None
    name = thread.name
    if name and not _numbered(name, "Thread-"):
        return name
    if target is not None:
        return getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    return type(thread).__name__


def task_role(task: Any) -> str | None:
    """The role of an asyncio task the program started: its given name, else its coroutine's;
    None for a library's task, and for a coroutine called `main` (`asyncio.run(main())`:
    the program itself, the process's owner)."""
    coro = task.get_coro()
    code = getattr(coro, "cr_code", None)
    if code is None or _library_code(code.co_filename):
        return None
    name = task.get_name()
    if name and not _numbered(name, "Task-"):
        return str(name)
    qualname = getattr(coro, "__qualname__", None)
    return qualname if isinstance(qualname, str) and qualname != "main" else None


def _numbered(name: str, prefix: str) -> bool:
    """Whether `name` is one the library gave: `Thread-3`, `Thread-3 (rollout)`, `Task-7`."""
    number = name[len(prefix):].split(" (", 1)[0] if name.startswith(prefix) else ""
    return number.isdigit()


def _current_task(aio: Any) -> Any:
    """The running task, or None (no event loop runs in this thread: asked without raising)."""
    try:
        return aio.current_task() if aio._get_running_loop() is not None else None
    except (AttributeError, RuntimeError):
        return None


def _program_call(frame: Any) -> bool:
    """Whether the put was called by the program's code: the first caller outside the queue
    modules (`put_nowait` and asyncio's `put` call the patched one)."""
    while frame is not None and frame.f_code.co_filename in _QUEUE_FILES:
        frame = frame.f_back
    return frame is not None and not _library_code(frame.f_code.co_filename)


def _library_code(filename: str) -> bool:
    """Whether code lives in the standard library, an installed package or flowmap (cached
    by file)."""
    known = _library_files.get(filename)
    if known is None:
        stdlib = getattr(sys, "_stdlib_dir", None) or ""
        known = any(d in filename for d in _LIBRARY_DIRS) or filename.startswith(_FLOWMAP_DIR) \
            or bool(stdlib) and filename.startswith(stdlib)
        if len(_library_files) < 4096:
            _library_files[filename] = known
    return known


def _step() -> int | None:
    step = getattr(state.tracer, "step", None)
    return step if type(step) is int else None
