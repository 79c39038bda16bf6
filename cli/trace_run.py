"""What `flowmap trace` does once its arguments are read: run the program traced.

Kept apart from the command's declaration (`trace.py`) so that `flowmap trace`
can run without importing the CLI framework (`entry.py`): typer and the
pydantic it loads to convert arguments cost ~0.2 s of CPU in every traced run.
"""

from __future__ import annotations

import atexit
import os
import re
import runpy
import sys
import traceback
from typing import TYPE_CHECKING

from flowmap import environment, rundir
from flowmap.errors import UsageError

if TYPE_CHECKING:
    from flowmap.capture.script import OnBind
    from flowmap.discover.auto import AutoSeams
    from flowmap.seams import Patcher


def trace_command(target: str | None, module: str | None, args: list[str], *, output: str | None,
                  process: str | None, seams: list[str], presets: list[str],
                  no_transport: list[str], aggregate: bool = False,
                  detail_steps: int | None = None, values: bool = False,
                  auto_seams: bool = True) -> int:
    """`flowmap trace`'s body, its arguments read: check them, run the program; its exit status."""
    if module is None and target is None:
        raise UsageError("give a script to trace (flowmap trace train.py) or a module (-m pkg.mod)")
    if module is None and not os.path.isfile(target or ""):
        raise UsageError(f"{target} is not a file; give the path of a Python script")
    stem = module.rsplit(".", 1)[-1] if module else os.path.splitext(os.path.basename(target or ""))[0]
    run_dir = output or rundir.default_run_dir(stem)
    seam_files = _seam_files(seams, presets)
    detail = _detail_window(aggregate, detail_steps)
    if no_transport:
        _transports_off(no_transport)
    from flowmap.capture import values as value_figures

    value_figures.set_enabled(values)  # before the program: children inherit the environment
    return run_traced(run_dir, target, module, args, process, seams=seam_files, aggregate=detail,
                      auto_seams=auto_seams and not seam_files and not imports_flowmap(target))


# `import flowmap`, `from flowmap.x import y`, `import numpy, flowmap` at a line's start
_IMPORTS_FLOWMAP = re.compile(rb"^[ \t]*(?:from[ \t]+flowmap\b|import[ \t][\w., \t]*\bflowmap\b)",
                              re.MULTILINE)


def imports_flowmap(script: str | None) -> bool:
    """Whether the script imports flowmap itself: it is instrumented (hops, owners, steps),
    and the watch for seams would end at its first call of the API anyway, having watched
    its start-up for nothing (about 50 ms of the built-in trainer's driver). A module run
    with -m is not read (finding it could import its package before tracing starts)."""
    if script is None:
        return False
    try:
        with open(script, "rb") as f:
            return _IMPORTS_FLOWMAP.search(f.read(1 << 20)) is not None
    except OSError:
        return False


def _detail_window(aggregate: bool, detail_steps: int | None) -> int | None:
    """The detail window in steps under --aggregate; None for a full trace."""
    from flowmap.capture import fold

    if detail_steps is not None and not aggregate:
        raise UsageError("--detail-steps goes with --aggregate (a full trace writes every hop)")
    if detail_steps is not None and detail_steps < 0:
        raise UsageError(f"--detail-steps takes a count of steps (0 or more), not {detail_steps}")
    if not aggregate:
        return None
    return fold.DETAIL_STEPS if detail_steps is None else detail_steps


def _seam_files(seams: list[str], presets: list[str]) -> list[str]:
    """The seam-map files to apply, validated now so a bad one stops us before the program runs."""
    if not seams and not presets:
        return []
    from flowmap.seams import load_seam_maps, preset_path

    files = [preset_path(name) for name in presets] + list(seams)
    load_seam_maps(files)  # raises SeamMapError (exit 2) with the line at fault
    return files


def _transports_off(names: list[str]) -> None:
    """Turn transports off here and, through FLOWMAP_TRANSPORTS, in every traced child."""
    from flowmap.integrations import transports

    try:
        os.environ[transports.ENV] = transports.without(names)
    except ValueError as exc:
        raise UsageError(f"--no-transport: {exc}") from None


def run_traced(
    run_dir: str,
    script: str | None,
    module: str | None,
    args: list[str],
    process: str | None,
    *,
    seams: list[str] | None = None,
    aggregate: int | None = None,
    auto_seams: bool = False,
) -> int:
    """Run the program under tracing; returns its exit status.

    `seams` are seam-map files patched into this process and, through the
    environment, into every traced child; `aggregate` is the detail window
    (in steps) of `--aggregate`, carried to children the same way. `auto_seams`: find the
    seams in the first step and record them from then on (`flowmap.discover.auto`).
    """
    from flowmap import launch
    from flowmap.capture import fold, session

    run_dir = os.path.abspath(run_dir)
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        # refused before the program runs: tracing into a file would fail quietly and
        # the program's exit status would hide it
        raise UsageError(f"{run_dir} is a file, not a run directory; choose another -o")
    if rundir.holds_shards(run_dir):
        raise UsageError(f"{run_dir} already holds a run; choose another -o or remove it")
    command = ["-m", module, *args] if module else [script or "", *args]
    launch.open_run(run_dir, command, aggregate)
    os.environ.update(session.child_environment(run_dir))
    if aggregate is None:
        os.environ.pop(fold.ENV, None)
    else:
        os.environ[fold.ENV] = str(aggregate)
    patcher = launch.begin(run_dir, process, aggregate=aggregate, seams=seams,
                           from_environment=False, follow_autograd=auto_seams)
    auto = _auto_seams(run_dir) if auto_seams else None
    atexit.register(_finish, run_dir, auto, patcher)  # runs before session.stop (atexit is LIFO)
    # the script's own functions a map names, wrapped as they are defined
    on_bind = patcher.bind_main if patcher is not None and patcher.has_main_targets() else None
    code = run_program(script, module, args, on_bind)
    _ended.append(code)
    if auto is not None:
        auto.finish("interrupted (Ctrl-C)" if code == 130 else "the program ended")
    rundir.write_meta(run_dir, exit_code=code)
    return code


def _auto_seams(run_dir: str) -> AutoSeams | None:
    from flowmap.discover import auto

    return auto.start(run_dir)


def run_program(script: str | None, module: str | None, args: list[str],
                 on_bind: OnBind | None = None) -> int:
    from flowmap.capture.script import run_script

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
            run_script(script, on_bind)
        return 0
    except SystemExit as exc:
        return _exit_status(exc.code)
    except KeyboardInterrupt as exc:  # Ctrl-C: the program's frames only, as Python prints them
        _print_user_traceback(exc)
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
    """The traceback as `python script.py` would print it: without flowmap's frames (the
    runner's, and a seam's wrapper between the program's own) and runpy's."""
    try:
        shown = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        _trim(shown, set())
        sys.stderr.write("".join(shown.format()))
    except Exception:  # never lose the program's own error to ours
        traceback.print_exception(type(exc), exc, exc.__traceback__)


# flowmap's package and its CLI's folder: apart in a source checkout (cli/ is flowmap.cli)
_FLOWMAP_DIR = os.path.dirname(os.path.abspath(rundir.__file__)) + os.sep
_CLI_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _ours(filename: str) -> bool:
    return (filename.startswith((_FLOWMAP_DIR, _CLI_DIR)) or os.path.basename(filename) == "runpy.py"
            or "<frozen runpy>" in filename)


def _trim(shown: traceback.TracebackException, seen: set[int]) -> None:
    if id(shown) in seen:
        return
    seen.add(id(shown))
    kept = [f for f in shown.stack if not _ours(f.filename)]
    if kept or not shown.stack:
        shown.stack = traceback.StackSummary.from_list(kept)
    for chained in (shown.__cause__, shown.__context__):
        if chained is not None:
            _trim(chained, seen)


#: The program's exit status once `run_program` returned (empty: it ended past it).
_ended: list[int] = []


def _finish(run_dir: str, auto: AutoSeams | None = None, patcher: Patcher | None = None) -> None:
    from flowmap import launch

    if auto is not None:
        auto.finish()  # a program that ended past run_traced (os._exit spared, sys.exit not)
    launch.end_run(run_dir, patcher)  # a seam map's unpatched targets print before our lines
    shown = _shown(run_dir)
    found = auto is not None and bool(auto.targets or auto.error)
    if found:  # what the automatic mode did, before the run's path and the next command
        sys.stderr.write(auto.summary() + "\n")  # type: ignore[union-attr]
    if _ended[-1:] == [130]:  # Ctrl-C: said last, beside the run that keeps what was recorded
        sys.stderr.write("flowmap: interrupted (Ctrl-C); the run keeps everything recorded "
                         "until then\n")
    sys.stderr.write(f"flowmap: run written to {shown}\n"
                     f"flowmap: next: flowmap report {shown}\n")
    if not found and _recorded_hops(run_dir) is False:
        if auto is not None:
            sys.stderr.write(auto.summary() + "\n")
        sys.stderr.write(_empty_run_hint() + "\n")
    sys.stderr.flush()


def _shown(run_dir: str) -> str:
    """The run's path as the user can paste it: relative below the working directory, else
    absolute — always absolute under `$FLOWMAP_RUNS`, or where the working directory is gone
    (a Ray Job's, removed as Ray unpacked its package again)."""
    if environment.get(environment.RUNS):
        return run_dir
    try:
        rel = os.path.relpath(run_dir)
    except OSError:  # FileNotFoundError from os.getcwd(): the working directory was removed
        return run_dir
    return rel if not rel.startswith("..") else run_dir


def _recorded_hops(run_dir: str) -> bool | None:
    """Whether any process of the run recorded a hop; None when the run cannot be read.

    A scan for the first hop line settles a busy run at once; only a run without
    one is read through the reader, so a format change cannot turn this wrong.
    """
    import stat

    from flowmap.read.shards import has_hop_line

    try:
        names = [os.path.join(run_dir, n) for n in rundir.shard_names(run_dir)]
        for path in names:
            if stat.S_ISREG(os.lstat(path).st_mode) and has_hop_line(path):
                return True
        import flowmap

        return bool(flowmap.load(run_dir).num_hops)
    except Exception:
        return None


def _empty_run_hint() -> str:
    """The one line a run with no hops ends with: the ways to get some."""
    import importlib.util

    from flowmap.seams.presets import available

    discover = importlib.util.find_spec("flowmap.cli.discover") is not None
    return (
        "flowmap: no hops were recorded; mark seams with flowmap.hop(...) or @flowmap.seam, "
        "or name functions to record with --seams FILE or --preset "
        f"{'/'.join(available())}"
        + (", or find them with flowmap discover SCRIPT" if discover else "")
        + "."
    )
