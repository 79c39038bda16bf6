"""`flowmap report [RUN] [--json]`: the terminal summary, or the stable JSON document."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def report(
    run: Annotated[str | None, typer.Argument(help="Run directory or shard; default: the newest run here.")] = None,  # noqa: UP007
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON document (docs/report-json.md).")] = False,
    project: Annotated[str | None, typer.Option("--project", metavar="PRESET[@CONTEXT]", help="Scale leaves with named dims to a model preset, e.g. deepseek-v3.2@32k.")] = None,  # noqa: UP007
) -> None:
    """Seams ranked by bytes, owners, counters, items and capture health."""
    from flowmap.model.document import report_document
    from flowmap.model.run import load, resolve

    r = load(resolve(run))
    if project:
        from flowmap.model.projection import project as project_run

        r = project_run(r, project)
    if as_json:
        from flowmap.strict_json import dumps

        sys.stdout.write(dumps(report_document(r.view), indent=2, sort_keys=True) + "\n")
        return
    from flowmap.report.terminal import print_report

    print_report(r.view)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
