"""Start tracing in a process: the one way `flowmap trace`, `flowmap.tracing()` and a child share.

All three arm a process through `begin`: its tracer (`flowmap.capture.session`),
the seam maps (the files named, or in a child those the parent exported in
`FLOWMAP_SEAMS`), the walk of the loss's graph that goes with a map
(`flowmap.integrations.autograd_flow`), then the framework and transport hooks
(`flowmap.integrations`). The run's first process also opens and ends the run
(`open_run`, `end_run`): `run.json` says when it started and ended, what it
folds, and the optimizer updates it counted; the seam-map targets no process
patched are named once, as it ends.

What still differs is each caller's own: `flowmap trace` runs a script, sets
the children's environment for good and may find the seams itself
(`flowmap.discover.auto`, a command's module, started after `begin`);
`tracing()` restores the environment after its block; the boot
(`boot/sitecustomize.py`) starts a multiprocessing `spawn` child's shard once the
child is named.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from flowmap import environment, rundir
from flowmap.capture import session

if TYPE_CHECKING:
    from flowmap.seams import Patcher


def begin(run_dir: str, process: str | None = None, *, aggregate: int | None = None,
          seams: list[str] | None = None, from_environment: bool = True,
          named_later: bool = False, follow_autograd: bool = False) -> Patcher | None:
    """Trace this process into `run_dir`; returns the seam-map patcher where a map applies.

    `seams`: the map files of the run's first process, patched here and exported to its
    children; without them, a process `from_environment` (a child) loads those its parent
    exported. `aggregate`: the detail window in steps (None: FLOWMAP_AGGREGATE's where
    `from_environment`, else every hop). `named_later`: a `spawn` child, whose shard opens
    once multiprocessing names it. `follow_autograd`: walk the loss's graph though no map
    applies yet (the CLI's automatic seams patch theirs later). When the shard cannot be
    opened (the warning is printed), nothing is armed and the program runs on untraced.
    """
    if named_later:
        session.start_named_later(run_dir)
    elif session.start(run_dir, process, aggregate, environment=from_environment) is None:
        return None
    patcher = None
    if seams:
        from flowmap.seams import activate

        patcher = activate(seams, run_dir=run_dir)
    elif from_environment and environment.get(environment.SEAMS):
        from flowmap.seams import activate_from_environment

        patcher = activate_from_environment()
    if patcher is not None or follow_autograd:
        from flowmap.integrations import autograd_flow

        autograd_flow.enable()  # a training step fed through lists still shows its inputs
    from flowmap.integrations import install_hooks

    install_hooks()  # transports, multiprocessing, Ray, verl, optimizer steps
    return patcher


def open_run(run_dir: str, command: list[str], aggregate: int | None) -> None:
    """The run's first process writes what `run.json` says before the program runs."""
    rundir.write_meta(run_dir, command=command, started_wall_ns=time.time_ns(),
                      **session.aggregate_meta(aggregate))


def end_run(run_dir: str, patcher: Patcher | None = None) -> None:
    """The run's first process is done: name the targets no process patched, write the
    optimizer updates counted, close this process's shard, and stamp the end."""
    if patcher is not None:
        from flowmap.seams import report_unresolved

        report_unresolved(patcher, run_dir)
    _write_steps(run_dir)
    session.stop()
    rundir.write_meta(run_dir, finished_wall_ns=time.time_ns())


def _write_steps(run_dir: str) -> None:
    """The steps flowmap counted from the optimizer, and from which: the report says
    "12 steps (torch.optim.Adam.step)" for 12 updates (step 0, before the first, is none)."""
    from flowmap.integrations import optimizer_steps

    try:
        counted = optimizer_steps.counted()
    except Exception:
        return
    if counted is not None:
        rundir.write_meta(run_dir, optimizer_updates=counted[0], steps_from=counted[1])
