"""`flowmap.tracing()`: trace a block of a Python program, as `flowmap trace` traces a script.

It sits above capture and the integrations and joins them: it writes the
run's `run.json` (`flowmap.rundir`), starts this process's tracer
(`flowmap.capture.session`), arms the transport and Ray hooks
(`flowmap.integrations`), and carries tracing into child processes.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator

from flowmap import rundir
from flowmap.capture import state
from flowmap.capture.session import aggregate_meta, propagate, start, stop


@contextlib.contextmanager
def tracing(path: str, *, process: str | None = None, children: bool = True,
            aggregate: int | None = None) -> Iterator[str]:
    """Trace the block into the run directory `path` (children too, unless `children=False`).

    `aggregate=N` folds hops past each process's first N steps into per-seam,
    per-step aggregates, as `flowmap trace --aggregate --detail-steps N` does.

    Yields the run path; `flowmap.load(path)` reads it afterwards. Inside a
    process that already traces (a program run by `flowmap trace`, or an
    outer `tracing` block) the block joins that run: it yields the outer
    run's path, says so once if `path` differs, and leaves the outer capture
    running when it ends.
    """
    outer = state.tracer
    if outer is not None and not getattr(outer, "closed", False):
        outer_dir = os.path.abspath(outer.run_dir)
        if os.path.abspath(os.fspath(path)) != outer_dir:
            sys.stderr.write(
                f"flowmap: tracing({os.fspath(path)!r}) inside a traced run: its events go to "
                f"the outer run {outer_dir}, which goes on after the block.\n"
            )
        yield outer_dir
        return
    if aggregate is not None and (type(aggregate) is not int or aggregate < 0):
        raise ValueError(f"aggregate must be a count of steps (0 or more), not {aggregate!r}")
    rundir.write_meta(path, command=list(sys.argv), **aggregate_meta(aggregate))
    if start(path, process, aggregate, environment=False) is not None:
        from flowmap.integrations import install_hooks  # at the first block, not at import

        install_hooks()  # transports and Ray, as under `flowmap trace`
    ctx = propagate(path, aggregate) if children else contextlib.nullcontext()
    try:
        with ctx:
            yield path
    finally:
        stop()
        rundir.write_meta(path, finished_wall_ns=time.time_ns())
