"""Start and stop tracing in a process, and carry it into child processes.

A run is a directory; every traced process writes its own shard there.
Children find the run through environment variables:

- `FLOWMAP_RUN_DIR` — the run directory;
- `FLOWMAP_AGGREGATE` — under `--aggregate`, the detail window in steps
  (`flowmap.capture.fold`);
- `PYTHONPATH` gains `flowmap/launch/boot`, whose `sitecustomize` starts
  tracing in any Python child (multiprocessing spawn and forkserver, plain
  `subprocess` children, `torch.multiprocessing.spawn` ranks, torchrun).

Forked children (multiprocessing's fork start method, `os.fork`) inherit the
parent's tracer object; an at-fork hook gives them a fresh shard instead.
Shards are closed at interpreter exit, by multiprocessing's finalizers (its
workers leave through `os._exit`, which skips `atexit`), and on SIGTERM.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from flowmap import environment
from flowmap.capture import fold, forksafe, sigterm, state
from flowmap.capture.tracer import Tracer

ENV_RUN_DIR = environment.RUN_DIR
ENV_IMPORT_ROOT = environment.IMPORT_ROOT
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # flowmap/
# The boot module's folder: it belongs to the layer that starts tracing (`flowmap.launch`);
# capture knows only its path, to put it on a child's PYTHONPATH.
BOOT_DIR = os.path.join(_PACKAGE_DIR, "launch", "boot")

_hooks_installed = False


def start(run_dir: str, process: str | None = None, aggregate: int | None = None, *,
          environment: bool = True) -> Tracer | None:
    """Begin tracing this process into `run_dir`; returns None (with a warning) if it cannot.

    `aggregate`: fold hops past a detail window of that many steps; None: as
    FLOWMAP_AGGREGATE says (unless `environment=False`), else every hop is written.
    """
    if state.tracer is not None:
        return state.tracer
    try:
        tracer = Tracer(run_dir, process)
    except OSError as exc:
        sys.stderr.write(
            f"flowmap: cannot write the trace to {run_dir} ({exc.strerror or exc}); "
            "capture is off, the program goes on.\n"
        )
        return None
    detail = fold.detail_from_environment() if aggregate is None and environment else aggregate
    if detail is not None:
        tracer.sink = fold.ProcessFolder(tracer, detail)
    tracer.on_stop = _forget
    state.tracer = tracer
    _install_process_hooks()
    return tracer


def start_named_later(run_dir: str) -> None:
    """Begin tracing a process that learns its name only after start-up.

    A multiprocessing `spawn` child starts a fresh interpreter, which boots
    flowmap before multiprocessing has told it which `Process` it is; a shard
    opened now would say `process: null` for good. So its shard opens when
    multiprocessing names it (`process_named`, as the `Process` bootstraps),
    or at its first event if that comes sooner. The forkserver's server,
    which only forks the children, opens none unless it records something.
    """
    if state.tracer is not None:
        return
    state.tracer = _PendingShard(run_dir, None, open_when_named=True)  # type: ignore[assignment]
    _install_process_hooks()


def process_named() -> None:
    """multiprocessing gave this process its name: a shard held back for it opens now."""
    pending = state.tracer
    if isinstance(pending, _PendingShard) and pending.open_when_named:
        pending.open()


def _install_process_hooks() -> None:
    global _hooks_installed
    if not _hooks_installed:
        _hooks_installed = True
        atexit.register(stop)
        forksafe.at_fork(before=_before_fork, after_in_parent=_after_fork_parent,
                         after_in_child=_after_fork_child)
        finish_with_multiprocessing()
    finish_on_sigterm()


def _forget(tracer: Tracer) -> None:
    """A tracer that stopped for good (a full disk) no longer records this process's events."""
    if state.tracer is tracer:
        state.tracer = None


def stop() -> None:
    """Close this process's shard (idempotent), once the sends other threads have in flight
    are recorded (`sigterm.settle`)."""
    if state.tracer is not None:
        sigterm.settle()
    tracer = state.tracer
    state.tracer = None
    if tracer is not None:
        tracer.close()


def _before_fork() -> None:
    pass  # nothing is buffered: every event is in the shard when it is recorded


_forks = 0  # children this process forked while tracing, in fork order: they are named by it


def _after_fork_parent() -> None:
    global _forks
    if state.tracer is not None:
        _forks += 1


def _after_fork_child() -> None:
    global _forks
    parent = state.tracer
    if parent is None:
        return
    # Every process by its name: a plain `os.fork` child would keep its parent's owner and
    # merge with it into one node. It is `<parent owner>/fork<N>` (N in the parent's fork
    # order, so stable across runs) unless it sets one; a multiprocessing child is renamed
    # by its `Process` as it bootstraps (`flowmap.integrations.processes`), and
    # `init_process_group` may still make it `rank<N>`.
    state.default_owner = f"{state.current_owner.get() or state.default_owner}/fork{_forks}"
    state.auto_owner = True
    state.current_owner.set(None)  # the parent's owner block, inherited with the stack
    _forks = 0
    # The inherited tracer maps the parent's shard: let go of it without
    # writing (the parent still writes there); our own shard opens at this
    # child's first event, and is durable from that event on.
    abandon = getattr(type(parent), "abandon", None)
    if abandon is not None:
        abandon(parent)
    parent.closed = True
    # the parent's detail window, read without opening a pending parent's shard
    own = vars(parent)
    sink = own.get("sink")
    detail = sink.detail_steps if isinstance(sink, fold.ProcessFolder) else own.get("aggregate")
    state.tracer = _PendingShard(parent.run_dir, parent.process, detail)  # type: ignore[assignment]


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class _PendingShard:
    """The tracer of a forked child until the child records something.

    A child forked only to exec another program (`subprocess` with a
    `preexec_fn`, as Ray and many launchers use) runs the at-fork hooks too;
    opening its shard at fork time would leave one empty, cut-short shard per
    exec in the run. The first use of any tracer method opens the real shard.
    """

    def __init__(self, run_dir: str, process: str | None, aggregate: int | None = None, *,
                 open_when_named: bool = False) -> None:
        self.run_dir = run_dir
        self.process = process
        self.aggregate = aggregate  # the parent's `--aggregate` detail window
        self.open_when_named = open_when_named  # a spawned child: open once multiprocessing names it
        self.closed = False
        self.fd = -1

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def abandon(self) -> None:
        self.closed = True

    def open(self) -> Tracer | None:
        """Open the real shard (None when this stand-in was closed, or the shard cannot open)."""
        installed: object = state.tracer  # this stand-in, typed as the Tracer it stands for
        if installed is self:
            state.tracer = None
        # the header names the process as flowmap named it (the fork's or its `Process`'s
        # default owner), where no name was given
        process = self.process or (state.default_owner if state.auto_owner else None)
        return start(self.run_dir, process, self.aggregate) if not self.closed else None

    def __getattr__(self, name: str) -> Any:
        real = self.open()
        return getattr(real, name) if real is not None else _noop


class _Anchor:
    """A long-lived object for multiprocessing's weak after-fork registry."""


_anchor = _Anchor()


def finish_with_multiprocessing(fn: Callable[[], None] = stop) -> None:
    """Run `fn` (close the shard; discovery's record too) when a multiprocessing worker ends.

    Workers leave through `os._exit`, which skips atexit; multiprocessing runs
    its own finalizers first. A forked worker clears the inherited registry
    before running `after_fork` callbacks, hence the re-registration there.
    A process that has not imported multiprocessing registers once it does (a
    patch-on-import hook): importing it here would cost every traced child's
    start-up ~10 ms (socket, pickle, subprocess), multiprocessing worker or not.
    """
    if "multiprocessing.util" not in sys.modules:
        from flowmap.capture import importhook

        importhook.on_import("multiprocessing.util", lambda _: finish_with_multiprocessing(fn))
        return
    import multiprocessing.util as mp_util

    try:
        mp_util.Finalize(_anchor, fn, exitpriority=-100)
        mp_util.register_after_fork(_anchor, lambda _: mp_util.Finalize(_anchor, fn, exitpriority=-100))
    except Exception:
        pass


def finish_on_sigterm(fn: Callable[[], None] = stop) -> None:
    """Run `fn` (close the shard) on SIGTERM, then die of SIGTERM as the program would have."""
    sigterm.finish_on_sigterm(fn)


def child_environment(run_dir: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that makes Python children of this process trace into `run_dir`."""
    env = boot_environment(env)
    env[ENV_RUN_DIR] = os.path.abspath(run_dir)
    return env


def boot_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that makes Python children import flowmap's boot module."""
    env = dict(os.environ if env is None else env)
    # Where flowmap itself lives, for a child that cannot import it otherwise
    # (run from a source checkout); the boot module appends it to sys.path.
    env[ENV_IMPORT_ROOT] = os.path.dirname(_PACKAGE_DIR)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != BOOT_DIR]
    env["PYTHONPATH"] = os.pathsep.join([BOOT_DIR] + paths)
    return env


@contextlib.contextmanager
def propagate(run_dir: str, aggregate: int | None = None) -> Iterator[None]:
    """Within the block, Python children started by this process are traced too."""
    saved = {k: os.environ.get(k)
             for k in (ENV_RUN_DIR, ENV_IMPORT_ROOT, "PYTHONPATH", fold.ENV)}
    os.environ.update(child_environment(run_dir))
    if aggregate is not None:
        os.environ[fold.ENV] = str(aggregate)
    else:
        os.environ.pop(fold.ENV, None)
    try:
        yield
    finally:
        restore_environ(saved)


def restore_environ(saved: dict[str, str | None]) -> None:
    """Put environment variables back as saved (None: the variable was unset)."""
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def aggregate_meta(detail_steps: int | None) -> dict[str, Any]:
    """What run.json says of an aggregated run (nothing for a full trace): `aggregate`
    true, the `detail_steps` window, and when a process without steps writes."""
    if detail_steps is None:
        return {}
    return {"aggregate": True, "detail_steps": detail_steps,
            "flush_hops": fold.FLUSH_HOPS, "flush_seconds": fold.FLUSH_US / 1e6}
