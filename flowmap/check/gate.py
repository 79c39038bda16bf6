"""The whole `check` in one call: read the run, compare to the baseline, apply budgets.

The CLI and the pytest plugin both go through here, so a rule never differs
between a local test and the CI job. Inputs are validated before the run is
read, so a config mistake (exit 2) is reported even when the run is huge.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from flowmap.check import baseline as baseline_file
from flowmap.check import budget_file
from flowmap.check.budgets import evaluate
from flowmap.check.compare import DEFAULT_MIN_BYTES_PER_STEP, compare
from flowmap.check.result import CheckReport
from flowmap.check.snapshot import Snapshot, from_run
from flowmap.check.tolerance import DEFAULT_TOLERANCE
from flowmap.errors import UsageError


@dataclass(slots=True)
class Options:
    run: str
    baseline: str | None = None
    budget: str | None = None
    tolerance: float = DEFAULT_TOLERANCE
    min_bytes_per_step: int = DEFAULT_MIN_BYTES_PER_STEP
    update: bool = False  # write the run's snapshot as the new baseline


def check(opts: Options) -> tuple[CheckReport, Snapshot]:
    """Returns the report and the run's snapshot (which `--update` writes)."""
    from flowmap.model.open_view import open_view

    if opts.baseline is None and opts.budget is None:
        raise UsageError("nothing to check against; give --baseline FILE and/or --budget FILE")
    old = _baseline(opts)
    budget = budget_file.read(opts.budget) if opts.budget else None
    run = open_view(opts.run)
    snap = from_run(run, counters=bool(old and old.counters is not None))
    if old is not None and not opts.update:
        _same_program(old, snap, opts.baseline or "", opts.run)
    results = []
    if old is not None:
        per_seam = budget.tolerance_for if budget is not None else None
        results += compare(snap, old, opts.tolerance, opts.min_bytes_per_step, per_seam)
    if budget is not None:
        results += evaluate(run, budget)
    report = CheckReport(
        results, run=opts.run, baseline=opts.baseline, budget=opts.budget,
        tolerance=opts.tolerance, min_bytes_per_step=opts.min_bytes_per_step,
        accepting=opts.update, detail=run.detail.note,
        ended=run.ending.sentence if run.ending.failed else "",
    )
    return report, snap


def _baseline(opts: Options) -> Snapshot | None:
    if opts.baseline is None:
        return None
    if opts.update and not os.path.exists(opts.baseline):
        return None  # --update records the first baseline
    return baseline_file.read(opts.baseline)


def _same_program(old: Snapshot, snap: Snapshot, baseline: str, run: str) -> None:
    """Refuse a baseline that shares no seam with the run: it was recorded from another program.

    Judged seam by seam it would read as every seam new and every old one gone (hundreds of
    lines and exit 1), where the mistake is the file given. A run with no seam, or an empty
    baseline, is left to the comparison: that is a run that lost its seams, not another program.
    """
    if old.seams and snap.seams and not set(old.seams) & set(snap.seams):
        raise UsageError(
            f"baseline {baseline} belongs to another program: none of its {len(old.seams)} seams "
            f"appears among the {len(snap.seams)} of {run}; give this program's baseline, or record "
            f"one with `flowmap baseline {run} -o FILE` (or `check --update`)")


def load_side(path: str, project: str | None = None) -> Snapshot:
    """One side of `flowmap diff`: a run directory/shard, or a baseline file.

    `project` (`PRESET[@CONTEXT]`) scales the run's leaves with named dims first.
    """
    from flowmap.model.open_view import open_view

    if os.path.isfile(path) and path.endswith(".json"):
        if project:
            raise UsageError(f"{path} is a baseline file; --project needs runs on both sides")
        return baseline_file.read(path)
    return from_run(open_view(path, project))
