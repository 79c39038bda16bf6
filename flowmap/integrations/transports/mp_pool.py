"""Who submitted a `multiprocessing.Pool` task, for the hops its handler threads record.

A pool sends each task from its task-handler thread and takes each result in its
result-handler thread: neither runs as the owner that called `map` or
`apply_async` (an owner is a context variable, which a thread started by the
pool does not inherit), so without this their messages would name the process's
default owner. A job's id is made in the caller's thread (`ApplyResult` and
`IMapIterator` take it from the pool's counter), so it is noted there with the
caller's owner and step; in a handler thread, a task `(job, i, func, args,
kwargs)` or a result `(job, i, value)` of a noted job is recorded as that owner's.
A `ProcessPoolExecutor` alike: its manager thread sends each `_CallItem` and takes each
`_ResultItem`; `submit` notes the work id it is about to take with the caller's owner
and step. Nothing of the task is read but its job number.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from flowmap.capture import forksafe, state
from flowmap.capture.api import current_owner

MAX_JOBS = 10_000
_jobs: dict[int, tuple[str, int | None]] = {}  # job -> (owner, step) of its caller
_work: dict[int, tuple[str, int | None]] = {}  # an executor's work id -> (owner, step) alike
_EXECUTOR_ITEMS = ("_CallItem", "_ResultItem")
# a forked worker's sends and receipts are its own, whatever its parent noted
forksafe.at_fork(after_in_child=_jobs.clear)
forksafe.at_fork(after_in_child=_work.clear)
_tl = threading.local()
_installed: list[bool] = []


def install(module: Any) -> None:
    """Patch `multiprocessing.pool` (idempotent)."""
    if _installed:
        return
    _installed.append(True)
    for cls in (module.ApplyResult, module.IMapIterator):
        cls.__init__ = _noting(cls.__init__)
    for name in ("_handle_tasks", "_handle_results"):
        setattr(module.Pool, name, staticmethod(_handler(getattr(module.Pool, name))))


def install_executor(module: Any) -> None:
    """Patch `concurrent.futures.process.ProcessPoolExecutor.submit` (idempotent)."""
    cls = getattr(module, "ProcessPoolExecutor", None)
    submit = getattr(cls, "submit", None)
    if cls is None or submit is None or getattr(submit, "__flowmap__", False):
        return

    @functools.wraps(submit)
    def flowmap_submit(self: Any, *args: Any, **kwargs: Any) -> Any:
        if state.tracer is not None:
            try:  # the id the work item is about to take (submitters of one thread: exact)
                work = self.__dict__.get("_queue_count")
                if type(work) is int:
                    _note(_work, work)
            except Exception:  # never into the program's submit()
                pass
        return submit(self, *args, **kwargs)

    flowmap_submit.__flowmap__ = True  # type: ignore[attr-defined]
    cls.submit = flowmap_submit


def _note(jobs: dict[int, tuple[str, int | None]], job: int) -> None:
    if len(jobs) >= MAX_JOBS:
        jobs.clear()
    step = getattr(state.tracer, "step", None)
    jobs[job] = (current_owner(), step if type(step) is int else None)


def _noting(init: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init)
    def flowmap_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if state.tracer is None:
            return
        try:
            job = self._job
            if type(job) is int:
                _note(_jobs, job)
        except Exception:  # never into the program's map()
            pass

    return flowmap_init


def _handler(body: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(body)
    def flowmap_handler(*args: Any, **kwargs: Any) -> Any:
        _tl.handler = True
        return body(*args, **kwargs)

    return flowmap_handler


def pool_thread() -> bool:
    """Whether the calling thread is a pool's own: a `Pool`'s handler or an executor's
    manager thread, whose `None` puts are the pool's shutdown sentinels, no message of the
    program's."""
    if getattr(_tl, "handler", False):
        return True
    return type(threading.current_thread()).__name__ == "_ExecutorManagerThread"


def sender(obj: Any, owner: Callable[[], str],
           step: Callable[[], int | None]) -> tuple[str | None, int | None]:
    """Who sends `obj`, in which step: the submitter of a pool's task or result, else the code
    running now (`owner`, `step`); None for a pool's own shutdown sentinel, no message."""
    if obj is None and pool_thread():
        return None, None
    return submitter(obj) or (owner(), step())


def submitter(obj: Any) -> tuple[str, int | None] | None:
    """The owner and step that submitted the pool task or result `obj`, when the calling
    thread is one of a pool's handlers and `obj` is one of its messages, or `obj` is an
    executor's work item or result; else None."""
    t = type(obj)
    if t.__name__ in _EXECUTOR_ITEMS and t.__module__ == "concurrent.futures.process":
        work = getattr(obj, "work_id", None)  # a plain attribute of the stdlib's class
        return _work.get(work) if type(work) is int else None
    if not getattr(_tl, "handler", False):
        return None
    if type(obj) is tuple and len(obj) in (3, 5) and type(obj[0]) is int:
        return _jobs.get(obj[0])
    return None
