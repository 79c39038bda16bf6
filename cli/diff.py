"""`flowmap diff RUN_A RUN_B`: seam by seam, before and after, with leaf-level differences."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def diff(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", help="Before: a run, a shard, or a baseline file.")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", help="After: a run, a shard, or a baseline file.")],
    fmt: Annotated[str, typer.Option("--format", "-f", metavar="FORMAT", help="text, markdown or json.")] = "text",
    project: Annotated[str | None, typer.Option("--project", metavar="PRESET[@CONTEXT]", help="Scale leaves with named dims of both runs to a model preset, e.g. deepseek-v3.2@32k.")] = None,
) -> None:
    """Bytes per step of every seam in A and B, delta and ratio, largest change first."""
    from flowmap.check.diff import diff_snapshots
    from flowmap.check.gate import load_side
    from flowmap.model.run import resolve
    from flowmap.reporters.check_formats import diff_renderer

    render = diff_renderer(fmt)
    a, b = resolve(run_a), resolve(run_b)
    label = f" (PROJECTION to {project})" if project else ""
    sys.stdout.write(render(diff_snapshots(load_side(a, project), load_side(b, project)),
                            a + label, b + label))


def register(app: typer.Typer) -> None:
    app.command("diff")(diff)
