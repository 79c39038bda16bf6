"""Is the watched program still running, did it exit, or was it cut short?

A shard closed cleanly ends in an `end` event; one whose process died
without closing (SIGKILL, the OOM killer) does not. So: every shard closed
is an exit; a shard still open whose process is gone (on this host) means
the run was cut short. So does the main process (the first on this host to
start, whose parent is no traced process) gone without closing its shard,
even while processes it started still run: their bytes go on, but the program
is over. `run.json`'s exit code, when `flowmap trace` wrote it, says how the
program ended.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from flowmap.model.processes import places
from flowmap.model.run import Run
from flowmap.read.events import Shard

RUNNING, EXITED, CUT_SHORT = "running", "exited", "cut short"


@dataclass(frozen=True, slots=True)
class Status:
    state: str  # RUNNING, EXITED or CUT_SHORT
    sentence: str  # what a viewer shows, one sentence
    final: bool = True  # nothing more will be written (False: processes of an ended run live on)


def status(run: Run) -> Status:
    """What the run's shards and run.json say about its program now."""
    code = run.meta.get("exit_code")
    killed = type(code) is int and code < 0
    open_shards = [s for s in run.shards if s.truncated]
    if not run.shards:
        return Status(RUNNING, "waiting for the program's first event")
    if killed or (open_shards and not any(_alive(s.pid, s.host) for s in open_shards)):
        how = f" (killed by signal {-code})" if killed and isinstance(code, int) else ""
        where = places(run.shards)
        dead = [f"{where[s.pid][0]}{where[s.pid][1]}" for s in open_shards][:3]
        which = f" ({', '.join(dead)})" if _hosts(run) > 1 and dead else ""
        return Status(CUT_SHORT, f"the run was cut short{how}: {len(open_shards)} of "
                                 f"{len(run.shards)} processes never closed their shard{which}")
    main = _main(run)
    if main is not None and main.truncated and not _alive(main.pid, main.host):
        alive = sum(1 for s in open_shards if s is not main and _alive(s.pid, s.host))
        os_pid, on = places(run.shards)[main.pid]
        return Status(CUT_SHORT, f"the run was cut short: its main process {os_pid}{on} ended "
                                 f"without closing its shard; {alive} of its "
                                 f"{len(run.shards) - 1} other processes still run", final=False)
    if not open_shards:
        if type(code) is int:
            return Status(EXITED, f"the program exited with code {code}")
        if "finished_wall_ns" in run.meta or not any(_alive(s.pid, s.host) for s in run.shards):
            return Status(EXITED, "the program exited")
    return Status(RUNNING, "running")


def _hosts(run: Run) -> int:
    return len({s.host_label or s.host for s in run.shards})


def _main(run: Run) -> Shard | None:
    """The run's main process on this host: the first to start whose parent is not traced."""
    here = socket.gethostname()
    pids = {s.pid for s in run.shards}
    roots = [s for s in run.shards if s.host in ("", here) and s.ppid not in pids]
    return min(roots, key=lambda s: (s.t0_wall_ns, s.pid), default=None)


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
