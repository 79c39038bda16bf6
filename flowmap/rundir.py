"""The run directory: its name, its `run.json`, its shard files, and the newest run.

A run is a directory (`flowmap.trace_format`): one shard per traced process,
`<host>-<pid>-<tag>.flowmap.jsonl`, and `run.json`, the run's small
description (command, times, exit code, the `--aggregate` window). The
tracer, `flowmap trace`, `flowmap.tracing()`, `merge` and the reader all meet
here, so the layout has one owner.

`run.json` is informational: a missing one is an empty description, and a
corrupt, binary, deeply nested or non-object one is one problem sentence in
the run's health, never a reason to refuse the run.
"""

from __future__ import annotations

import json
import os
import stat
import time
from typing import Any

from flowmap import environment
from flowmap import trace_format as tf
from flowmap.errors import NoRunFound, NotATrace, UsageError
from flowmap.safe_read import load_json, read_text

RUNS_DIR = "flowmap-runs"  # where `flowmap trace` puts a run that is not named
# Where unnamed runs go instead (an absolute path, say): a Ray Job's entrypoint runs in a
# working directory Ray unpacked for it, which the submitter never sees and Ray may replace.
ENV_RUNS = environment.RUNS
MAX_HEADER = 1 << 20  # bytes of a shard's first line read for its start time


def run_name(stem: str) -> str:
    """`grpo_tiny-20261203-150830-123-4242`: to the millisecond, then the pid.

    Two traces started in the same second (or millisecond) by two processes
    still get two runs: a pid is unique among running processes.
    """
    now = time.time()
    ms = int(now * 1000) % 1000
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}-{ms:03d}-{os.getpid()}"


def runs_dir() -> str:
    """Where unnamed runs go: `$FLOWMAP_RUNS`, else `flowmap-runs` in the working directory."""
    return environment.get(ENV_RUNS) or RUNS_DIR


def default_run_dir(stem: str) -> str:
    """Where a run of the program `stem` goes when no directory is given."""
    return os.path.join(runs_dir(), run_name(stem))


def shard_file_name(host: str, pid: int, tag: str) -> str:
    """The name of a process's shard (`tag` tells apart the shards of one pid)."""
    return f"{host}-{pid}-{tag}{tf.SHARD_SUFFIX}"


def shard_names(run_dir: str) -> list[str]:
    """The names of the shard files in `run_dir`, sorted; OSError if it cannot be listed."""
    return sorted(n for n in os.listdir(run_dir) if n.endswith(tf.SHARD_SUFFIX))


def holds_shards(run_dir: str) -> bool:
    """Whether `run_dir` is a directory that holds a shard already."""
    return os.path.isdir(run_dir) and bool(shard_names(run_dir))


# -- run.json ---------------------------------------------------------------------
def meta_path(run_dir: str) -> str:
    return os.path.join(run_dir, tf.RUN_META)


def read_meta(path: str, problems: list[str] | None = None) -> dict[str, Any]:
    """The object in the `run.json` at `path`, or {} (with a sentence added to `problems`)
    if it cannot be read."""
    try:
        doc = load_json(read_text(path, "run description"), path, "run description")
    except FileNotFoundError:
        return {}
    except UsageError as exc:
        why = str(exc)
    except (OSError, ValueError):
        why = f"the run description {path} is not valid JSON"
    else:
        if isinstance(doc, dict):
            return doc
        why = f"the run description {path} is not a JSON object"
    if problems is not None:
        problems.append(why + "; ignored")
    return {}


# What this process wrote into each run's run.json (by absolute path), written again with
# every update: a run directory removed under the program (a Ray Job's working directory,
# replaced as Ray unpacks its package again) keeps its command and start when rewritten.
_written: dict[str, dict[str, Any]] = {}


def write_meta(run_dir: str, **fields: Any) -> None:
    """Create or update `run.json` with `fields` (a run that cannot take it goes on without)."""
    path = meta_path(run_dir)
    mine = _written.setdefault(os.path.abspath(path), {})
    mine.update(fields)
    meta = read_meta(path)
    meta.update({"flowmap": "run", "schema": tf.SCHEMA_VERSION}, **mine)
    meta.setdefault("started_wall_ns", time.time_ns())
    mine.setdefault("started_wall_ns", meta["started_wall_ns"])
    try:
        os.makedirs(run_dir, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
            f.write("\n")
    except OSError:
        pass


# -- the default run ----------------------------------------------------------------
def is_run_dir(path: str) -> bool:
    if not os.path.isdir(path):
        return False
    if os.path.exists(meta_path(path)):
        return True
    return bool(shard_names(path))


def newest_run(cwd: str = ".") -> str:
    """The run in `cwd`, `cwd/flowmap-runs/` or `$FLOWMAP_RUNS` that started last (not the
    last one written to)."""
    candidates: list[str] = []
    for base in dict.fromkeys((cwd, os.path.join(cwd, RUNS_DIR), os.path.join(cwd, runs_dir()))):
        if not os.path.isdir(base):
            continue
        for name in os.listdir(base):
            p = os.path.join(base, name)
            if is_run_dir(p):
                candidates.append(p)
    if not candidates:
        raise NoRunFound(
            "no run found here; trace one with `flowmap trace SCRIPT` or pass RUN explicitly"
        )
    return max(candidates, key=lambda p: (started_ns(p), p))


def started_ns(run_dir: str) -> int:
    """When the run started: run.json's `started_wall_ns`, else its earliest shard header.

    Not a file's mtime: writing an HTML page or a merge into an older run
    must not make it the default for `report`, `baseline` and `check`.
    """
    started = read_meta(meta_path(run_dir)).get("started_wall_ns")
    if type(started) is int:
        return started
    starts = []
    for name in shard_names(run_dir):
        try:
            with open_regular(os.path.join(run_dir, name)) as f:
                header = json.loads(f.readline(MAX_HEADER + 1))
            t0 = header.get("t0_wall_ns") if isinstance(header, dict) else None
            if type(t0) is int:
                starts.append(t0)
        except (OSError, ValueError, RecursionError):
            pass
    return min(starts) if starts else int(os.path.getmtime(run_dir) * 1e9)


def resolve(run: str | None) -> str:
    """The RUN argument of a CLI verb: given, or the newest in the working directory."""
    if run is None:
        return newest_run()
    if not os.path.exists(run):
        raise NotATrace(f"{run} does not exist")
    return run


def open_regular(path: str) -> Any:
    """Open `path` for reading if it is a regular file; never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise NotATrace(f"cannot read {_show(path)}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise NotATrace(f"cannot read {_show(path)}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotATrace(f"{_show(path)} is not a regular file (a FIFO, device or directory)")
    return os.fdopen(fd, "rb")


def _show(path: str) -> str:
    """`path` safe to print: a lone surrogate becomes the text `\\udcXX`."""
    return os.fspath(path).encode("utf-8", "backslashreplace").decode("utf-8")
