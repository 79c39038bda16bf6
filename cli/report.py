"""`flowmap report [RUN] [--json]`: the terminal summary, or the stable JSON document."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def report(
    run: Annotated[str | None, typer.Argument(help="Run directory or shard; default: the newest run here.")] = None,  # noqa: UP007
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON document (docs/report-json.md).")] = False,
    project: Annotated[str | None, typer.Option("--project", metavar="PRESET[@CONTEXT]", help="Scale leaves with named dims to a model preset, e.g. deepseek-v3.2@32k.")] = None,  # noqa: UP007
    top: Annotated[int, typer.Option("--top", metavar="N", min=1, help="Show the N heaviest seams (default 15).")] = 15,
    show_all: Annotated[bool, typer.Option("--all", help="Show every seam and every finding.")] = False,
    width: Annotated[int | None, typer.Option("--width", metavar="COLUMNS", min=40, help="Lay the report out for this many columns (default: the terminal's, 80 when piped).")] = None,  # noqa: UP007
) -> None:
    """What to fix first: the run, its health and top findings, then the heaviest seams."""
    from flowmap.model.open_view import open_view
    from flowmap.reporters import reporter

    view = open_view(run, project)
    if as_json:
        from flowmap.reporters.json_document import JsonOptions

        sys.stdout.write(reporter("json")(view, JsonOptions()))
        return
    from rich.console import Console

    from flowmap.reporters.terminal import TOP_FINDINGS, TerminalOptions, print_lines

    console = Console(width=width) if width else Console()
    options = TerminalOptions(console.width, None if show_all else top,
                              None if show_all else TOP_FINDINGS)
    print_lines(console, reporter("terminal")(view, options))


def register(app: typer.Typer) -> None:
    app.command("report")(report)
