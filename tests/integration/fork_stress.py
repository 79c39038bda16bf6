"""Fork while other threads are inside flowmap: a program for tests/integration/test_fork_safety.py.

    python fork_stress.py CASE METHOD FORKS

Three threads exercise one part of capture in a loop (CASE) while the main thread
forks FORKS times (METHOD: `os` for a plain `os.fork`, `mp` for multiprocessing's
`fork` start method). Each child does the same thing once, records one `child_done`
hop and exits. A child that has not exited after
CHILD_WATCHDOG_S dumps its threads' stacks (faulthandler); the parent stops at the
second such child, prints `hangs N` and `forks N` (how many it made), then exits. Run it under `flowmap trace`.
"""

from __future__ import annotations

import faulthandler
import importlib.abc
import multiprocessing
import os
import sys
import threading
import time
from typing import Any

import flowmap

CHILD_WATCHDOG_S = 5.0
MAX_HANGS = 2
PAYLOAD = {"tokens": list(range(16)), "reward": 0.5}


def _hop() -> None:
    flowmap.hop("worker", "learner", PAYLOAD, name="trajectory")


def _counter() -> None:
    flowmap.counter("in_flight", 3)


def _import_hook() -> None:
    from flowmap.capture import importhook

    importhook.on_import("a_module_nobody_imports", lambda module: None)
    importhook.waiting()


def _queue_put() -> None:
    _queue.put(PAYLOAD)


_queue: Any = None
CASES = {
    "hop": _hop,  # the tracer's lock and its shard mapping
    "first_hop": _hop,  # the describers' lazy import, held open (see _SlowImport)
    "aggregate": _hop,  # the in-process folder (run under --aggregate)
    "counter": _counter,
    "import_hook": _import_hook,  # the patch-on-import registry's lock
    "queue": _queue_put,  # a multiprocessing queue's transport capture and its first message
}


class _SlowImport(importlib.abc.MetaPathFinder):
    """Holds the describers' import open for a while, so the fork lands inside it."""

    def __init__(self) -> None:
        self.entered = threading.Event()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == "flowmap.capture.describers.walk":
            self.entered.set()
            time.sleep(0.3)
        return None


def _child(work: Any) -> None:
    faulthandler.dump_traceback_later(CHILD_WATCHDOG_S, exit=True)
    work()
    flowmap.hop("forked", "parent", 1, name="child_done")  # one per child, counted by the test
    flowmap.step(1)  # under --aggregate, writes the step's folds: `os._exit` closes nothing
    if _queue is not None:
        _queue.close()
        _queue.join_thread()


def _fork_once(method: str, work: Any) -> int:
    """Fork a child that does `work` once; returns its exit status (3 if it hung)."""
    if method == "mp":
        p = multiprocessing.get_context("fork").Process(target=_child, args=(work,))
        p.start()
        p.join(CHILD_WATCHDOG_S * 3)
        if p.exitcode is None:
            p.kill()
            p.join()
            return 3
        return 3 if p.exitcode == 1 else p.exitcode
    pid = os.fork()
    if pid == 0:
        try:
            _child(work)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return 3 if code == 1 else code  # faulthandler's `exit=True` leaves with 1


def main() -> None:
    global _queue
    case, method, forks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    work = CASES[case]
    if case == "queue":
        _queue = multiprocessing.get_context("fork").Queue()
    slow = _SlowImport()
    if case == "first_hop":
        sys.meta_path.insert(0, slow)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            work()
            if _queue is not None:
                _queue.get()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    if case == "first_hop":
        slow.entered.wait(10)  # a thread is inside the describers' import now
    hangs = done = 0
    while done < forks and hangs < MAX_HANGS:  # a broken build fails fast, not in 200 watchdogs
        hangs += _fork_once(method, work) != 0
        done += 1
    stop.set()
    for t in threads:
        t.join()
    if _queue is not None:
        drained = 0
        while not _queue.empty():
            _queue.get()
            drained += 1
    print(f"hangs {hangs}")
    print(f"forks {done}")


if __name__ == "__main__":
    main()
