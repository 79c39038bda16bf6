"""JSON documents for machines: stable keys, sorted, versioned by `schema`."""

from __future__ import annotations

from typing import Any

from flowmap.check.diff import SeamDelta, to_dict
from flowmap.check.result import STATUSES, CheckReport
from flowmap.strict_json import dumps

SCHEMA = 1


def render_check(report: CheckReport) -> str:
    doc: dict[str, Any] = {
        "flowmap": "check",
        "schema": SCHEMA,
        "passed": not report.failed,
        "headline": report.headline(),
        "run": report.run,
        "baseline": report.baseline,
        "budget": report.budget,
        "tolerance": report.tolerance,
        "min_bytes_per_step": report.min_bytes_per_step,
        **({"detail": report.detail} if report.detail else {}),
        **({"ended": report.ended} if report.ended else {}),
        "counts": {s: report.count(s) for s in STATUSES},
        "results": [
            {
                "group": r.group,
                "subject": r.subject,
                "check": r.check,
                "status": r.status,
                "summary": r.summary,
                "details": r.details,
                "measured": r.measured,
                "reference": r.reference,
                "limit": r.limit,
                "unit": r.unit,
            }
            for r in report.ordered()
        ],
    }
    return dumps(doc, indent=2, sort_keys=True) + "\n"


def render_diff(deltas: list[SeamDelta], a: str, b: str) -> str:
    doc = {"flowmap": "diff", "schema": SCHEMA, "a": a, "b": b, "seams": [to_dict(d) for d in deltas]}
    return dumps(doc, indent=2, sort_keys=True) + "\n"
