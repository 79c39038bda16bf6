"""`flowmap trace [-o RUN] SCRIPT [ARGS...]` / `flowmap trace [-o RUN] -m MODULE [ARGS...]`.

The program runs in this process, unmodified: `__name__ == "__main__"`,
`sys.argv` as it expects, `sys.path[0]` its folder, its stdout and stderr
untouched, its exit status passed through. Python children are traced into
the same run. The shard is closed at interpreter exit (after the program's
non-daemon threads have ended), then the run's path and the next command are
printed on stderr.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from flowmap.cli.trace_run import trace_command


def trace(
    ctx: typer.Context,
    target: Annotated[str | None, typer.Argument(metavar="SCRIPT", help="The Python script to run.")] = None,  # noqa: UP007
    output: Annotated[str | None, typer.Option("-o", "--output", metavar="RUN", help="Run directory to write (default: flowmap-runs/<name>-<time>).")] = None,  # noqa: UP007
    module: Annotated[str | None, typer.Option("-m", metavar="MODULE", help="Run a module, like python -m.")] = None,  # noqa: UP007
    process: Annotated[str | None, typer.Option("--process", help="A name for the main process in the run.")] = None,  # noqa: UP007
    seams: Annotated[Optional[list[str]], typer.Option("--seams", metavar="FILE", help="A seam map (YAML) naming functions to record as seams; repeatable.")] = None,  # noqa: UP007, UP045
    preset: Annotated[Optional[list[str]], typer.Option("--preset", metavar="NAME", help="A seam map shipped with flowmap (e.g. trl); repeatable.")] = None,  # noqa: UP007, UP045
    no_transport: Annotated[Optional[list[str]], typer.Option("--no-transport", metavar="NAMES", help="Do not capture these transports: dist, mp, zmq, cuda_ipc, queue (comma list, or all); repeatable.")] = None,  # noqa: UP007, UP045
    aggregate: Annotated[bool, typer.Option("--aggregate", help="For long runs: past each process's first steps, fold hops into per-seam, per-step aggregates.")] = False,
    detail_steps: Annotated[int | None, typer.Option("--detail-steps", metavar="N", help="With --aggregate: the steps each process writes hop by hop (default 3).")] = None,  # noqa: UP007
    values: Annotated[bool, typer.Option("--values", help="Read data: on sampled hops, record each leaf's min, max and zero tail (for the padding and wide-ids findings).")] = False,
    no_auto_seams: Annotated[bool, typer.Option("--no-auto-seams", help="With no --seams/--preset: do not find the seams in the first step and record them.")] = False,
) -> None:
    """Run a Python script (or -m module) unmodified, tracing every seam it records."""
    args = list(ctx.args)
    if module is not None and target is not None:
        args.insert(0, target)  # after `-m MODULE --`, the first module argument lands here
        target = None
    code = trace_command(target, module, args, output=output, process=process, seams=seams or [],
                         presets=preset or [], no_transport=no_transport or [], aggregate=aggregate,
                         detail_steps=detail_steps, values=values, auto_seams=not no_auto_seams)
    raise typer.Exit(code)


# The program's own arguments follow SCRIPT (or -m MODULE) untouched.
PROGRAM_ARGS = {
    "allow_extra_args": True,
    "ignore_unknown_options": True,
    "allow_interspersed_args": False,
}


def register(app: typer.Typer) -> None:
    from flowmap.cli.usage import usage_line

    app.command("trace", context_settings=PROGRAM_ARGS,
                cls=usage_line("SCRIPT [ARGS]...  |  -m MODULE [ARGS]..."))(trace)
