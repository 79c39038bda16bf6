"""`flowmap top [RUN]`: watch a running pipeline's seams in the terminal (docs/live.md)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def top(
    run: Annotated[str | None, typer.Argument(help="Run directory or shard; default: the newest run here.")] = None,  # noqa: UP007
    once: Annotated[bool, typer.Option("--once", help="Print one screen and exit (for scripts).")] = False,
    sort: Annotated[str, typer.Option("--sort", metavar="rate|total|hops", help="Rank seams by bytes/s over the last 10 s (default), total bytes, or hops/s.")] = "rate",
    width: Annotated[int | None, typer.Option("--width", metavar="COLUMNS", min=40, help="Lay the screen out for this many columns.")] = None,  # noqa: UP007
) -> None:
    """Seams ranked by bytes/s, run health and findings, redrawn every 1.5 s; keys t/r/h sort, p pauses, q quits."""
    from rich.console import Console

    from flowmap.errors import UsageError
    from flowmap.live.top import top as run_top
    from flowmap.live.top import top_once
    from flowmap.model.run import resolve

    if sort not in ("rate", "total", "hops"):
        raise UsageError(f"--sort takes rate, total or hops, not {sort!r}")
    path = resolve(run)
    console = Console(width=width) if width else Console()
    frame = top_once(path, console, sort) if once else run_top(path, console, sort)
    if frame.gone:
        sys.stderr.write(f"flowmap: {frame.gone}\n")
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("top")(top)
