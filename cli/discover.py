"""`flowmap discover [-o seams.yaml] SCRIPT [ARGS...]` / `-m MODULE`: find the seams, write the map.

The program runs in this process as `flowmap trace` runs it (argv, sys.path,
output and exit status its own) while its Python calls are watched, in this
process and in every Python child. When the budget is spent or the program
ends, what every process saw is merged, folded and ranked; the table goes to
stderr (the program's stdout stays its own) and the seam map to `-o`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import Annotated, Optional, TypeVar

import typer

from flowmap import environment
from flowmap.errors import UsageError

DEFAULT_SECONDS = 60.0
DEFAULT_CALLS = 2_000_000
DEFAULT_STEPS = 5


def discover(
    ctx: typer.Context,
    target: Annotated[str | None, typer.Argument(metavar="SCRIPT", help="The Python script to run.")] = None,  # noqa: UP007
    output: Annotated[str, typer.Option("-o", "--output", metavar="FILE", help="Seam map to write.")] = "seams.yaml",
    module: Annotated[str | None, typer.Option("-m", metavar="MODULE", help="Run a module, like python -m.")] = None,  # noqa: UP007
    seconds: Annotated[str, typer.Option("--seconds", metavar="S", help="Stop watching after S seconds (per process).")] = str(DEFAULT_SECONDS),
    calls: Annotated[str, typer.Option("--calls", metavar="N", help="Stop watching after N watched calls (per process).")] = str(DEFAULT_CALLS),
    steps: Annotated[str, typer.Option("--steps", metavar="K", help="Stop watching after K training steps (flowmap.step or a preset's step).")] = str(DEFAULT_STEPS),
    include: Annotated[Optional[list[str]], typer.Option("--include", metavar="PKG", help="Watch only these packages; repeatable.")] = None,  # noqa: UP007, UP045
    exclude: Annotated[Optional[list[str]], typer.Option("--exclude", metavar="PKG", help="Never watch these packages; repeatable.")] = None,  # noqa: UP007, UP045
    min_bytes: Annotated[str, typer.Option("--min-bytes", metavar="B", help="Leave out seams that never moved B bytes in one call (e.g. 4KiB).")] = "0",
) -> None:
    """Run a program unmodified, find the functions that hand tensors over, write a seam map."""
    from flowmap.discover import Budget, Filters

    args = list(ctx.args)
    if module is None and target is None:
        raise UsageError("give a script to discover (flowmap discover train.py) or a module (-m pkg.mod)")
    if module is not None and target is not None:
        args.insert(0, target)
    if module is None and not os.path.isfile(target or ""):
        raise UsageError(f"{target} is not a file; give the path of a Python script")
    out_dir = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(out_dir):
        raise UsageError(f"cannot write {output}: folder {out_dir} does not exist")
    budget = Budget(_positive(seconds, "--seconds", float), _positive(calls, "--calls", int),
                    _positive(steps, "--steps", int))
    filters = Filters(tuple(include or ()), tuple(exclude or ()), _bytes(min_bytes))
    for pkg in filters.include + filters.exclude:
        if not all(part.isidentifier() for part in pkg.split(".")):
            raise UsageError(f"{pkg!r} is not a package name such as trl or my_pkg.workers")
    command = "flowmap discover " + " ".join(sys.argv[2:] if len(sys.argv) > 2 else [])
    code = run_discovery(output, target, module, args, budget, filters, command.strip())
    raise typer.Exit(code)


N = TypeVar("N", int, float)  # the number a flag takes


def _positive(text: str, flag: str, kind: Callable[[str], N]) -> N:
    try:
        value: N | None = kind(text)
    except ValueError:
        value = None
    if value is None or value <= 0:
        raise UsageError(f"{flag} takes a positive number, not {text!r}")
    return value


def _bytes(text: str) -> int:
    from flowmap.units import parse_bytes

    value = parse_bytes(text)  # a usage error naming the forms it reads
    if value < 0:
        raise UsageError(f"--min-bytes takes a size such as 4096 or 4KiB, not {text!r}")
    return value


def run_discovery(output: str, script: str | None, module: str | None, args: list[str],
                  budget: object, filters: object, command: str) -> int:
    """Run the program while watching it; print the table, write the map; its exit status."""
    from flowmap.capture import session
    from flowmap.cli.trace_run import run_program
    from flowmap.discover import analyse, naming, process, seammap, table

    directory = tempfile.mkdtemp(prefix="flowmap-discover-")
    try:
        process.write_config(directory, filters, budget)  # type: ignore[arg-type]
        os.environ.update(session.boot_environment())
        os.environ[process.ENV_DISCOVER] = directory
        process.start(directory, filters, budget)  # type: ignore[arg-type]
        code = run_program(script, module, args)
        process.finish("interrupted (Ctrl-C)" if code == 130 else "the program ended")
        os.environ.pop(process.ENV_DISCOVER, None)
        records = process.read_all(directory)
        naming.recheck(records)
        found = analyse(records, filters.min_bytes)  # type: ignore[attr-defined]
    finally:
        keep = environment.get(environment.DISCOVER_KEEP)  # every process's record, for a closer look
        if keep:
            shutil.copytree(directory, keep, dirs_exist_ok=True)
        shutil.rmtree(directory, ignore_errors=True)
    sys.stderr.write(table.render(found))
    if not found.seams:
        why = ("no function call carried a tensor or an array" if not found.unnamed and
               not found.below_min_bytes and not found.sinks
               else "no candidate can be a seam-map target")
        sys.stderr.write(f"flowmap: discover: {why} while watching; no seam map written.\n")
        return code
    text = seammap.render(found, command)
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        sys.stderr.write(f"flowmap: discover: cannot write {output} ({exc.strerror or exc}).\n")
        return code or 1
    run = shlex.join(["-m", module, *args] if module else [script or "", *args])
    sys.stderr.write(f"flowmap: seam map written to {output} ({len(found.seams)} seams)\n"
                     f"flowmap: next: flowmap trace --seams {output} {run}\n")
    sys.stderr.flush()
    return code


def register(app: typer.Typer) -> None:
    from flowmap.cli.trace import PROGRAM_ARGS

    app.command("discover", context_settings=PROGRAM_ARGS)(discover)
