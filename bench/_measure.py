"""Run one command and print what its whole process tree cost.

bench_peers.py starts a fresh one of these per run, so `RUSAGE_CHILDREN` holds
that run alone. It makes itself the tree's child subreaper (Linux), so a
process the command leaves behind (multiprocessing's resource tracker outlives
the driver by a moment) is re-parented here and reaped, and its CPU time and
peak RSS count too. Prints `rc wall_s peak_kib cpu_s unreaped`; the wall time
stops when the command returns, as a user sees it.

Usage: python bench/_measure.py CMD [ARGS...]
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
REAP_TIMEOUT_S = 60.0


def _become_subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: orphans go to init and their cost is not counted


def _reap_orphans(timeout_s: float) -> int:
    """Wait for the processes re-parented here; how many were still alive at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 0
        if pid == 0:
            if time.monotonic() > deadline:
                return len(_children())
            time.sleep(0.05)


def _children() -> list[str]:
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            return f.read().split()
    except OSError:
        return []


def main() -> int:
    _become_subreaper()
    os.environ["FLOWMAP_BENCH_MEASURE_PID"] = str(os.getpid())
    t0 = time.perf_counter()
    rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t0
    unreaped = _reap_orphans(REAP_TIMEOUT_S)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(rc, wall, ru.ru_maxrss, ru.ru_utime + ru.ru_stime, unreaped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
