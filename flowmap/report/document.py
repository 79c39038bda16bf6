"""The `flowmap report --json` document: stable, documented, sorted.

Its fields are a contract (docs/report-json.md); add fields, never rename or
remove them without raising `REPORT_SCHEMA`.
"""

from __future__ import annotations

from typing import Any

from flowmap.model.findings import findings
from flowmap.model.run import Run

REPORT_SCHEMA = 1


def report_document(run: Run) -> dict[str, Any]:
    items = run.items
    h = run.health
    return {
        "flowmap": "report",
        "schema": REPORT_SCHEMA,
        "run": run.path,
        "truncated": run.truncated,
        "projection": run.projection,
        "steps": run.num_steps,
        "seams": [_seam(s) for s in run.seams.values()],
        "owners": [
            {
                "name": o.name,
                "role": o.role,
                "bytes_in": o.bytes_in,
                "bytes_out": o.bytes_out,
                "hops_in": o.hops_in,
                "hops_out": o.hops_out,
                "pids": o.pids,
            }
            for o in run.owners.values()
        ],
        "counters": {
            c.name: {
                "count": c.count,
                "min": c.min,
                "max": c.max,
                "mean": c.mean,
                "last": c.last,
                "owners": c.owners,
                "series": [[round(t, 6), v] for t, v in c.series],
            }
            for c in run.counters.values()
        },
        "items": {
            "total": items.total,
            "consumed": items.consumed,
            "dropped": items.dropped_total,
            "dropped_by_reason": items.dropped,
        },
        "findings": [f.as_dict() for f in findings(run)],
        "health": {
            "shards": h.shards,
            "events": h.events,
            "tracer_errors": h.tracer_errors,
            "error_messages": h.error_messages[:20],
            "truncated_shards": h.truncated_shards,
            "bad_lines": h.bad_lines,
            "problems": h.problems[:100],
        },
    }


def _seam(s: Any) -> dict[str, Any]:
    return {
        "src": s.src,
        "dst": s.dst,
        "name": s.name,
        "hops": s.hops,
        "total_bytes": s.total_bytes,
        "max_bytes": s.max_bytes,
        "p50_bytes": s.p50_bytes,
        "p90_bytes": s.p90_bytes,
        "bytes_per_step": round(s.bytes_per_step_mean, 3),
        "bytes_per_step_max": s.bytes_per_step_max,
        "hops_per_step": round(s.hops_per_step, 3),
        "transports": s.transports,
        "residency_mean_s": s.residency_mean_s,
        "residency_max_s": s.residency_max_s,
        "leaves": [leaf.as_dict() for leaf in s.leaves],
    }
