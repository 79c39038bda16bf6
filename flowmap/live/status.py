"""Is the watched program still running, did it exit, or was it cut short?

A shard closed cleanly ends in an `end` event; one whose process died
without closing (SIGKILL, the OOM killer) does not. So: every shard closed
is an exit; a shard still open whose process is gone (on this host) means
the run was cut short. `run.json`'s exit code, when `flowmap trace` wrote it,
says how the program ended.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from flowmap.model.run import Run

RUNNING, EXITED, CUT_SHORT = "running", "exited", "cut short"


@dataclass(frozen=True, slots=True)
class Status:
    state: str  # RUNNING, EXITED or CUT_SHORT
    sentence: str  # what a viewer shows, one sentence


def status(run: Run) -> Status:
    """What the run's shards and run.json say about its program now."""
    code = run.meta.get("exit_code")
    killed = type(code) is int and code < 0
    open_shards = [s for s in run.shards if s.truncated]
    if not run.shards:
        return Status(RUNNING, "waiting for the program's first event")
    if killed or (open_shards and not any(_alive(s.pid, s.host) for s in open_shards)):
        how = f" (killed by signal {-code})" if killed and isinstance(code, int) else ""
        return Status(CUT_SHORT, f"the run was cut short{how}: {len(open_shards)} of "
                                 f"{len(run.shards)} processes never closed their shard")
    if not open_shards:
        if type(code) is int:
            return Status(EXITED, f"the program exited with code {code}")
        if "finished_wall_ns" in run.meta or not any(_alive(s.pid, s.host) for s in run.shards):
            return Status(EXITED, "the program exited")
    return Status(RUNNING, "running")


def _alive(pid: int, host: str) -> bool:
    """Whether process `pid` runs (a zombie does not); a process on another host counts as alive."""
    if host and host != socket.gethostname():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True
