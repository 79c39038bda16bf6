"""`flowmap report [RUN] [--json]`: the terminal summary, or the stable JSON document."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer


def report(
    run: Annotated[Optional[str], typer.Argument(help="Run directory or shard; default: the newest run here.")] = None,  # noqa: UP007
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON document (docs/report-json.md).")] = False,
) -> None:
    """Seams ranked by bytes, owners, counters, items and capture health."""
    from flowmap.model.run import load, resolve
    from flowmap.report.document import report_document

    r = load(resolve(run))
    if as_json:
        json.dump(report_document(r), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return
    from flowmap.report.terminal import print_report

    print_report(r)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
