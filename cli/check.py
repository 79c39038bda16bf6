"""`flowmap check [RUN] --baseline FILE [--budget FILE]`: the CI gate on seam payloads.

Exit 0 within limits, 1 on any regression or broken budget, 2 on a usage or
configuration error (raised as UsageError and printed as one line by main).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from flowmap.errors import UsageError


def check(
    run: Annotated[str | None, typer.Argument(help="Run directory or shard; default: the newest run here.")] = None,
    baseline: Annotated[str | None, typer.Option("--baseline", "-b", metavar="FILE", help="Baseline from `flowmap baseline`.")] = None,
    budget: Annotated[str | None, typer.Option("--budget", metavar="FILE", help="Budget YAML: absolute limits (docs/ci.md).")] = None,
    tolerance: Annotated[str, typer.Option("--tolerance", "-t", metavar="PERCENT", help="Allowed growth of a seam's bytes per step over the baseline, e.g. 10% or 0.1.")] = "10%",
    min_bytes: Annotated[str, typer.Option("--min-bytes", metavar="SIZE", help="Per-step changes smaller than this never count (widened dtypes and new arrays always do).")] = "1 KiB",
    fmt: Annotated[str, typer.Option("--format", "-f", metavar="FORMAT", help="text, markdown, json, junit or github.")] = "text",
    output: Annotated[str | None, typer.Option("--output", "-o", metavar="FILE", help="Write the report to FILE; the verdict line goes to stderr.")] = None,
    update: Annotated[bool, typer.Option("--update", help="Rewrite the baseline from this run (budgets still apply).")] = False,
) -> None:
    """Compare a run with a baseline and budgets; exit 1 if a seam's payload regressed."""
    from flowmap.check import baseline as baseline_file
    from flowmap.check.gate import Options
    from flowmap.check.gate import check as run_check
    from flowmap.check.tolerance import parse_fraction
    from flowmap.model.run import resolve
    from flowmap.reporters.check_formats import check_renderer

    render = check_renderer(fmt)
    if update and baseline is None:
        raise UsageError("--update needs --baseline FILE to know which file to rewrite")
    opts = Options(
        run=resolve(run), baseline=baseline, budget=budget,
        tolerance=parse_fraction(tolerance), min_bytes_per_step=_size(min_bytes), update=update,
    )
    report, snap = run_check(opts)
    _emit(render(report), output, report.headline())
    if fmt == "github":
        from flowmap.reporters.check_formats import github, markdown

        github.append_step_summary(markdown.render_check(report))
    failed = report.failed
    if update and baseline is not None:
        baseline_file.write(baseline, snap)
        accepted = f"; {report.accepted} regression(s) accepted" if report.accepted else ""
        sys.stderr.write(f"flowmap: baseline {baseline} updated from {opts.run} "
                         f"({len(snap.seams)} seams{accepted})\n")
    if failed:
        raise typer.Exit(1)


def _size(text: str) -> int:
    from flowmap.units import parse_bytes

    try:
        return parse_bytes(text)
    except UsageError as exc:
        raise UsageError(f"--min-bytes: {exc}") from None


def _emit(text: str, output: str | None, headline: str) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from None
    sys.stderr.write(f"{headline} (report in {output})\n")


def register(app: typer.Typer) -> None:
    app.command("check")(check)
