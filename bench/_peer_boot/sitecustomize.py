"""Carry memray or torch.profiler into the spawned children of a run, for bench_peers.py.

The trainer's ranks are `spawn`ed: fresh interpreters that `memray run
--follow-fork` does not follow (it follows `fork()` only) and that a
`torch.profiler` block in the driver cannot see. A user profiling the whole
job wraps each rank too; this start-up hook does that for the bench, so every
row of its table covers the same process tree. bench_peers.py puts this
directory on PYTHONPATH with FLOWMAP_BENCH_PEER (`memray` or `torch`) and
FLOWMAP_BENCH_OUT (the tool's output directory). The process the measuring
parent started is skipped: the tool's own runner traces it.

Each child writes its own file (`memray-<pid>.bin`, `torch-<pid>.json`), closed
by multiprocessing's finalizers or at exit, whichever comes first.
"""

import atexit
import os
import sys
from collections.abc import Callable


def _chain_original() -> None:
    """Run the `sitecustomize` this one shadows, if any, as flowmap's own boot does."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _is_root() -> bool:
    return str(os.getppid()) == os.environ.get("FLOWMAP_BENCH_MEASURE_PID")


def _on_exit(stop: Callable[[], object]) -> None:
    import multiprocessing.util

    done: list[bool] = []

    def once() -> None:
        if not done:
            done.append(True)
            stop()

    # Spawned multiprocessing children run their finalizers, then leave through sys.exit.
    multiprocessing.util.Finalize(None, once, exitpriority=-100)
    atexit.register(once)


def _start_memray(out: str) -> None:
    import memray

    tracker = memray.Tracker(os.path.join(out, f"memray-{os.getpid()}.bin"), follow_fork=True)
    tracker.__enter__()
    _on_exit(lambda: tracker.__exit__(None, None, None))


def _start_torch(out: str) -> None:
    if any("resource_tracker" in a for a in sys.orig_argv):
        return  # it never imports torch; importing it here would bill torch for nothing
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True)
    prof.start()

    def stop() -> None:
        prof.stop()
        prof.export_chrome_trace(os.path.join(out, f"torch-{os.getpid()}.json"))

    _on_exit(stop)


def _start() -> None:
    tool = os.environ.get("FLOWMAP_BENCH_PEER")
    out = os.environ.get("FLOWMAP_BENCH_OUT")
    if not tool or not out or _is_root():
        return
    try:
        if tool == "memray":
            _start_memray(out)
        elif tool == "torch":
            _start_torch(out)
    except Exception as exc:  # the run goes on; the missing file shows in the table
        print(f"bench _peer_boot: {tool} did not start in {os.getpid()}: {exc}", file=sys.stderr)


_chain_original()
_start()
