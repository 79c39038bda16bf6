"""`flowmap merge -o OUT RUN [RUN...]`: one run from shards collected on several hosts."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer


def merge(
    runs: Annotated[list[str], typer.Argument(metavar="RUN...", help="Run directories (or shard files) to merge.")],
    output: Annotated[str, typer.Option("-o", "--output", metavar="OUT", help="The merged run directory to write.")],
) -> None:
    """Merge runs from several hosts into one, aligning their clocks on one host's timeline."""
    from flowmap.errors import UsageError
    from flowmap.read.merge import merge_runs, repeated_shard

    repeated = repeated_shard(runs)
    if repeated:
        raise UsageError(repeated)
    result = merge_runs(runs, output)
    try:
        shown = os.path.relpath(result.out)
    except OSError:  # the working directory is gone: the path as given
        shown = result.out
    sys.stderr.write(
        f"flowmap: merged {result.shards} shards from {len(result.hosts)} host(s) "
        f"({', '.join(result.hosts)}) into {shown}"
        + (f"; {result.aligned} aligned to {result.reference_host}'s clock" if result.aligned else "")
        + f"\nflowmap: next: flowmap report {shown}\n"
        + "".join(f"flowmap: left out: {why}\n" for why in result.skipped)
    )


def register(app: typer.Typer) -> None:
    app.command("merge")(merge)
