"""`flowmap export [RUN] --perfetto PATH [--steps A:B]`: the run as a trace for ui.perfetto.dev."""

from __future__ import annotations

from typing import Annotated

import typer

from flowmap.errors import UsageError


def export(
    run: Annotated[str | None, typer.Argument(help="Run directory or shard; default: the newest run here.")] = None,
    perfetto: Annotated[str | None, typer.Option("--perfetto", metavar="PATH", help="Write Chrome Trace Event JSON (open it at ui.perfetto.dev).")] = None,
    steps: Annotated[str | None, typer.Option("--steps", metavar="A:B", help="Only training steps A to B (inclusive), or one step N: a long run's full trace is more than a browser opens.")] = None,
) -> None:
    """Write the run in another tool's format: one track per owner, hops linked by flow arrows."""
    if not perfetto:
        raise UsageError("say what to write: --perfetto PATH")
    selected = parse_steps(steps) if steps else None
    from flowmap.gc_pause import paused_gc
    from flowmap.model.open_view import open_view
    from flowmap.reporters import reporter
    from flowmap.reporters.output import check_output, write_output
    from flowmap.reporters.perfetto import PerfettoOptions

    view = open_view(run)
    check_output(perfetto)
    with paused_gc():
        typer.echo(write_output(perfetto, reporter("perfetto")(view, PerfettoOptions(selected))))


def parse_steps(text: str) -> tuple[int, int]:
    """'3:5' -> (3, 5), '4' -> (4, 4); a usage error otherwise."""
    first, sep, last = text.partition(":")
    try:
        a = int(first)
        b = int(last) if sep else a
    except ValueError:
        raise UsageError(f"cannot read --steps {text!r}; write it like 3:5 or 4") from None
    if b < a:
        raise UsageError(f"--steps {text} ends before it starts; write it like 3:5")
    return (a, b)


def register(app: typer.Typer) -> None:
    app.command("export")(export)
