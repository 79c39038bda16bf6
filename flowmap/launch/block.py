"""`flowmap.tracing()`: trace a block of a Python program, as `flowmap trace` traces a script.

It starts tracing the way the CLI does (`flowmap.launch.begin`: the tracer, seam
maps, the integrations' hooks), opens and ends the run as the CLI does, and carries
tracing into the child processes started inside the block.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from flowmap import environment
from flowmap.capture import state
from flowmap.capture.session import propagate, restore_environ
from flowmap.launch import begin, end_run, open_run


@contextlib.contextmanager
def tracing(path: str, *, process: str | None = None, children: bool = True,
            aggregate: int | None = None, seams: list[str] | None = None) -> Iterator[str]:
    """Trace the block into the run directory `path` (children too, unless `children=False`).

    `aggregate=N` folds hops past each process's first N steps into per-seam,
    per-step aggregates, as `flowmap trace --aggregate --detail-steps N` does.
    `seams` names seam-map files to patch, as `flowmap trace --seams` does; a
    target no process patched is named as the block ends.

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
    saved = {environment.SEAMS: environment.get(environment.SEAMS)}  # `seams` exports its maps
    open_run(path, list(sys.argv), aggregate)
    patcher = None
    try:
        patcher = begin(path, process, aggregate=aggregate, seams=seams, from_environment=False)
        with propagate(path, aggregate) if children else contextlib.nullcontext():
            yield path
    finally:
        end_run(path, patcher)
        restore_environ(saved)
