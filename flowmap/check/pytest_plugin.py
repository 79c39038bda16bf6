"""pytest plugin (entry point `flowmap`): trace a test body and assert seam budgets.

    @pytest.mark.flowmap_budget("rollout -> ready_buffer", max_bytes_per_hop="64 KB")
    def test_rollout_sends_handles():
        run_one_rollout()

The test body runs under `flowmap.tracing` into a temporary run; afterwards
every marker's limits are checked on each seam its address matches (same
rules as a budget file's `seams:` entries, see docs/ci.md). A failure reads
like pytest-memray's: "Seam X was limited to Y but carried Z", then the
largest leaves, and the run is kept for `flowmap report`.

Only the hook bodies import flowmap's reader, so installing flowmap costs
other projects' test sessions nothing until a test uses the marker.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Generator
from typing import Any

import pytest

MARKER = "flowmap_budget"
LIMIT_KEYS = ("max_bytes_per_hop", "max_bytes_per_step", "max_hops_per_step")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(seam, max_bytes_per_hop=None, max_bytes_per_step=None, max_hops_per_step=None): "
        "trace the test and fail if a seam matching the address ('src -> dst : name', globs "
        "allowed) exceeds a limit; sizes like '64 KB' or '2 MiB'",
    )


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: Any) -> Generator[None, Any, Any]:
    markers = list(pyfuncitem.iter_markers(MARKER))
    if not markers:
        return (yield)
    import flowmap

    budget = _budget(markers)  # a bad marker fails the test before it runs
    if flowmap.is_tracing():
        warnings.warn(
            f"{MARKER} not checked: this process is already traced by flowmap", stacklevel=1
        )
        return (yield)
    run_dir = tempfile.mkdtemp(prefix="flowmap-pytest-")
    keep = False
    try:
        with flowmap.tracing(run_dir):
            result = yield
        failures = _failures(run_dir, budget)
        if failures:
            keep = True  # for `flowmap report`: the failure message names it
            failures.append(f"(the run is kept at {run_dir}: flowmap report {run_dir})")
            pytest.fail("\n".join(failures), pytrace=False)
        return result
    finally:
        if not keep:
            shutil.rmtree(run_dir, ignore_errors=True)


def _budget(markers: list[Any]) -> Any:
    """The markers as one `Budget` (one seam entry per marker)."""
    from flowmap.check.budget_file import Budget, Limit, SeamBudget
    from flowmap.check.selectors import parse_selector
    from flowmap.errors import UsageError
    from flowmap.units import parse_bytes

    budget = Budget(path=f"@pytest.mark.{MARKER}")
    for m in markers:
        error: str | None = None
        try:
            if len(m.args) != 1:
                raise UsageError("give exactly one seam address, e.g. 'rollout -> ready_buffer'")
            unknown = sorted(set(m.kwargs) - set(LIMIT_KEYS))
            if unknown:
                raise UsageError(f"unknown limit {unknown[0]!r}; expected one of {', '.join(LIMIT_KEYS)}")
            if not m.kwargs:
                raise UsageError(f"give at least one limit: {', '.join(LIMIT_KEYS)}")
            limits = {
                k: Limit(float(v if k == "max_hops_per_step" else parse_bytes(v)), str(v), 0)
                for k, v in sorted(m.kwargs.items())
            }
            budget.seams.append(SeamBudget(parse_selector(m.args[0]), limits, 0))
        except (UsageError, TypeError, ValueError) as exc:
            error = f"{MARKER}{m.args!r}: {exc}"
        if error is not None:  # outside the except: pytest would print the error twice, chained
            pytest.fail(error, pytrace=False)
    return budget


def _failures(run_dir: str, budget: Any) -> list[str]:
    from flowmap.check.budgets import evaluate
    from flowmap.model.run import load

    run = load(run_dir).view
    out: list[str] = []
    for r in evaluate(run, budget):
        if r.status == "warn":
            seen = ", ".join(s.label for s in run.seams.values()) or "none"
            out.append(f"No hop in this test crossed a seam matching {r.subject!r} (seams seen: {seen})")
        elif r.failed:
            out.append(f"Seam {r.subject} {r.summary}")
            if r.details:
                out.append("  largest leaves:")
                out += [f"    {d}" for d in r.details]
    return out
