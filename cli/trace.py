"""`flowmap trace [-o RUN] SCRIPT [ARGS...]` / `flowmap trace [-o RUN] -m MODULE [ARGS...]`.

The program runs in this process, unmodified: `__name__ == "__main__"`,
`sys.argv` as it expects, `sys.path[0]` its folder, its stdout and stderr
untouched, its exit status passed through. Python children are traced into
the same run. The shard is closed at interpreter exit (after the program's
non-daemon threads have ended), then the run's path and the next command are
printed on stderr.
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
import time
import traceback
from typing import Annotated, Optional

import typer

from flowmap.errors import UsageError


def trace(
    ctx: typer.Context,
    target: Annotated[Optional[str], typer.Argument(metavar="SCRIPT", help="The Python script to run.")] = None,  # noqa: UP007
    output: Annotated[Optional[str], typer.Option("-o", "--output", metavar="RUN", help="Run directory to write (default: flowmap-runs/<name>-<time>).")] = None,  # noqa: UP007
    module: Annotated[Optional[str], typer.Option("-m", metavar="MODULE", help="Run a module, like python -m.")] = None,  # noqa: UP007
    process: Annotated[Optional[str], typer.Option("--process", help="A name for the main process in the run.")] = None,  # noqa: UP007
) -> None:
    """Run a Python script (or -m module) unmodified, tracing every seam it records."""
    args = list(ctx.args)
    if module is None and target is None:
        raise UsageError("give a script to trace (flowmap trace train.py) or a module (-m pkg.mod)")
    if module is not None and target is not None:
        args.insert(0, target)  # after `-m MODULE --`, the first module argument lands here
    if module is None and not os.path.isfile(target or ""):
        raise UsageError(f"{target} is not a file; give the path of a Python script")
    stem = module.rsplit(".", 1)[-1] if module else os.path.splitext(os.path.basename(target or ""))[0]
    run_dir = output or os.path.join("flowmap-runs", f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}")
    code = run_traced(run_dir, target, module, args, process)
    raise typer.Exit(code)


def run_traced(
    run_dir: str, script: str | None, module: str | None, args: list[str], process: str | None
) -> int:
    """Run the program under tracing; returns its exit status."""
    from flowmap.capture import session

    run_dir = os.path.abspath(run_dir)
    if os.path.isdir(run_dir) and any(n.endswith(".flowmap.jsonl") for n in os.listdir(run_dir)):
        raise UsageError(f"{run_dir} already holds a run; choose another -o or remove it")
    command = ["-m", module, *args] if module else [script or "", *args]
    session.write_run_meta(run_dir, command=command, started_wall_ns=time.time_ns())
    os.environ.update(session.child_environment(run_dir))
    session.start(run_dir, process)
    atexit.register(_finish, run_dir)  # runs before session.stop (atexit is LIFO)
    code = _run_program(script, module, args)
    session.write_run_meta(run_dir, exit_code=code)
    return code


def _run_program(script: str | None, module: str | None, args: list[str]) -> int:
    saved_argv, saved_path0 = sys.argv[:], sys.path[0]
    try:
        if module:
            sys.argv = [module, *args]
            sys.path[0] = os.getcwd()
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            assert script is not None
            sys.argv = [script, *args]
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as exc:
        return _exit_status(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        return 130
    except BaseException as exc:
        _print_user_traceback(exc)
        return 1
    finally:
        sys.argv, sys.path[0] = saved_argv, saved_path0


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")  # sys.exit("message") prints it and exits 1, as Python does
    return 1


def _print_user_traceback(exc: BaseException) -> None:
    """The traceback as `python script.py` would print it: without flowmap's and runpy's frames."""
    tb = exc.__traceback__
    here = os.path.dirname(os.path.abspath(__file__))
    while tb is not None and (
        tb.tb_frame.f_code.co_filename.startswith(here)
        or os.path.basename(tb.tb_frame.f_code.co_filename) == "runpy.py"
        or "<frozen runpy>" in tb.tb_frame.f_code.co_filename
    ):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _finish(run_dir: str) -> None:
    from flowmap.capture import session

    session.stop()
    session.write_run_meta(run_dir, finished_wall_ns=time.time_ns())
    rel = os.path.relpath(run_dir)
    shown = rel if not rel.startswith("..") else run_dir
    sys.stderr.write(f"flowmap: run written to {shown}\n"
                     f"flowmap: next: flowmap report {shown}\n")
    sys.stderr.flush()


def register(app: typer.Typer) -> None:
    app.command(
        "trace",
        context_settings={
            "allow_extra_args": True,
            "ignore_unknown_options": True,
            "allow_interspersed_args": False,
        },
    )(trace)
