"""Discovery across processes: every process writes what it saw to the discovery dir.

The parent makes a directory, writes the budget and filters there
(`config.json`) and exports `FLOWMAP_DISCOVER=<dir>` with flowmap's boot
directory on PYTHONPATH: every Python child (spawn, subprocess, torchrun
ranks, Ray workers) then starts its own watcher at start-up. Each process
writes one `<host>-<pid>.discover.json` when its budget is spent, or at exit
(atexit, multiprocessing's finalizers, SIGTERM); a forked child
starts from empty counts. The parent reads them all back (`read_all`).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from typing import Any

from flowmap import environment
from flowmap.capture import forksafe, importhook, session
from flowmap.discover.filters import Filters
from flowmap.discover.watch import Budget, Watcher, process_id

ENV_DISCOVER = environment.DISCOVER
CONFIG = "config.json"
SUFFIX = ".discover.json"

FLUSH_S = 0.1

_watcher: Watcher | None = None
_directory = ""
_written = threading.Event()  # set once the final record is written
_paths: dict[int, str] = {}  # pid -> this process's record file


def step_targets() -> dict[tuple[str, str], str]:
    """Functions whose call sets the training step: `flowmap.step`, and each preset's `step`."""
    out = {("flowmap.capture.api", "step"): "n"}
    try:
        from flowmap.seams.loader import load_shipped_map
        from flowmap.seams.presets import available, preset_path

        for name in available():
            for spec in load_shipped_map(preset_path(name)).seams:
                if spec.step is not None:
                    out[(spec.module, spec.qualname)] = spec.step
    except Exception:
        pass
    return out


def write_config(directory: str, filters: Filters, budget: Budget) -> None:
    with open(os.path.join(directory, CONFIG), "w", encoding="utf-8") as f:
        json.dump({"filters": filters.to_json(), "budget": budget.to_json()}, f)


def start(directory: str, filters: Filters, budget: Budget) -> Watcher:
    """Start watching this process; its record goes to `directory` when watching ends."""
    global _watcher, _directory
    _written.clear()
    _directory = directory
    watcher = Watcher(filters, budget, step_targets(), on_stop=lambda: write(directory))
    _watcher = watcher
    atexit.register(finish)
    forksafe.at_fork(after_in_child=_after_fork_child)
    # the exits that skip atexit: multiprocessing workers (os._exit), a Pool's SIGTERM
    session.finish_with_multiprocessing(finish)
    session.finish_on_sigterm(finish)
    watcher.start()
    _start_flusher(directory)
    importhook.on_import("torch.optim.optimizer", _count_updates)
    return watcher


def _count_updates(module: Any) -> None:
    """Steps of a program that never sets one: torch's global post-hook on every optimizer."""
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is not None:
        register(_updated)


def _updated(optimizer: Any, args: Any, kwargs: Any) -> None:
    if _watcher is not None:
        _watcher.optimizer_step(optimizer)


def finish(reason: str = "the program ended") -> None:
    """Stop watching and write this process's record (idempotent)."""
    if _watcher is not None:
        _watcher.stop(reason)  # writes through on_stop, unless it already did


def start_from_environment() -> Watcher | None:
    """In a Python child of a discovery run (called by flowmap's boot module)."""
    directory = environment.get(ENV_DISCOVER)
    if not directory or _watcher is not None:
        return None
    with open(os.path.join(directory, CONFIG), encoding="utf-8") as f:
        config = json.load(f)
    return start(directory, Filters.from_json(config["filters"]),
                 Budget.from_json(config["budget"]))


def snapshot(w: Watcher) -> dict[str, Any]:
    """This process's record: every watched function that was called, with its target."""
    from flowmap.discover.naming import resolve

    data: dict[str, Any] = {
        "pid": os.getpid(),
        "argv": list(sys.argv),
        "calls": w.calls,
        "steps": sorted(w.steps),
        "watched_ns": w.watched_ns,
        "stop_reason": w.stop_reason,
        "functions": {},
    }
    with w.lock:
        stats = [(i, i.stats.to_json()) for i in w.infos() if i.stats.candidate_calls]
    for info, st in stats:
        target, why = resolve(info)
        data["functions"][info.key] = {
            "module": info.module, "qualname": info.qualname, "file": info.filename,
            "line": info.lineno, "argnames": list(info.argnames), "target": target,
            "why_not": why, "nn_module": bool(info.nn_module), "stats": st,
            "ignores_args": info.ignores_args,
        }
    return data


def write(directory: str, final: bool = True) -> None:
    """Write (or rewrite) this process's record; after the final write, nothing more."""
    w = _watcher
    if w is None or _written.is_set():
        return
    if final:
        _written.set()
    path = _paths.setdefault(os.getpid(), os.path.join(
        directory, f"{process_id()}-{os.urandom(2).hex()}{SUFFIX}"))
    tmp = f"{path}.{threading.get_ident()}.tmp"
    data = snapshot(w)
    if not final and not data["functions"]:
        return  # nothing seen yet (or ever: a framework's service process)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.isdir(directory):  # else the run is over: a late child has nobody to tell
            sys.stderr.write(f"flowmap: discover: cannot write {path} ({exc.strerror or exc}).\n")


def read_all(directory: str) -> list[dict[str, Any]]:
    """Every process's record in the discovery dir, in a stable order."""
    out = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(SUFFIX):
            try:
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    out.append(json.load(f))
            except (OSError, ValueError):
                continue
    return out


def _start_flusher(directory: str) -> None:
    """Rewrite the record soon after each recorded call (at most every FLUSH_S): a process
    killed without warning (Ray's workers at shutdown) loses only its last moments."""

    def loop() -> None:
        while not _written.is_set():
            w = _watcher
            if w is None or w.stopped:
                return
            if not w.recorded.wait(FLUSH_S):
                continue
            w.recorded.clear()
            try:
                write(directory, final=False)
            except Exception:  # a record that changed as it was read: the next call
                w.recorded.set()
            _written.wait(FLUSH_S)

    threading.Thread(target=loop, name="flowmap-discover-flush", daemon=True).start()


def _after_fork_child() -> None:
    w = _watcher
    if w is not None:
        w.reset_after_fork()
        _written.clear()
        if _directory:
            _start_flusher(_directory)
