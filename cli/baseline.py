"""`flowmap baseline [RUN] -o FILE`: record what each seam carries, for `flowmap check`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def baseline(
    run: Annotated[str | None, typer.Argument(help="Run directory or shard; default: the newest run here.")] = None,
    output: Annotated[str, typer.Option("-o", "--output", metavar="FILE", help="Baseline file to write.")] = "flowmap-baseline.json",
    counters: Annotated[bool, typer.Option("--counters", help="Also record counter and item summaries (for readers; check ignores them).")] = False,
) -> None:
    """Record a baseline: per seam bytes per step and per hop, hops per step, leaf schema."""
    from flowmap.check import baseline as baseline_file
    from flowmap.check.snapshot import from_run
    from flowmap.model.format import fmt_steps
    from flowmap.model.open_view import open_view

    view = open_view(run)
    path = view.path
    snap = from_run(view, counters=counters)
    baseline_file.write(output, snap)
    sys.stderr.write(
        f"flowmap: baseline written to {output} ({len(snap.seams)} seams, "
        f"{fmt_steps(snap.steps)})\n"
        f"flowmap: next: flowmap check {path} --baseline {output}\n"
    )


def register(app: typer.Typer) -> None:
    app.command("baseline")(baseline)
