"""The `flowmap report --json` document: the `RunView` serialised, stable, documented, sorted.

`report_document` is the one function that turns the read model into JSON;
the per-record helpers (`seam_dict`, `owner_dict`, ...) are the one JSON form
of each record, for any other output that embeds one (a leaf's is
`flowmap.model.json_forms.leaf_dict`, which the model's networkx graph uses too). Its fields are
a contract (docs/report-json.md); add fields, never rename or remove them
without raising `REPORT_SCHEMA`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from flowmap.findings import findings
from flowmap.model.json_forms import leaf_dict
from flowmap.model.types import CounterStats, OwnerStats, Process, SeamStats
from flowmap.model.view import RunView
from flowmap.strict_json import dumps

REPORT_SCHEMA = 1
MAX_ERROR_MESSAGES = 20


@dataclass(frozen=True, slots=True)
class JsonOptions:
    """`indent` None writes one line; the keys are sorted either way."""

    indent: int | None = 2


def report(view: RunView, options: JsonOptions) -> str:
    """The document as strict JSON text (NaN and infinity as null), ending in a newline."""
    return dumps(report_document(view), indent=options.indent, sort_keys=True) + "\n"


def report_document(view: RunView) -> dict[str, Any]:
    items, h = view.items, view.health
    return {
        "flowmap": "report",
        "schema": REPORT_SCHEMA,
        "run": view.path,
        "truncated": view.truncated,
        "projection": dataclasses.asdict(view.projection) if view.projection else None,
        "steps": view.step_count,  # 0: the run had none, and every "per step" figure is a total
        "program": program_dict(view),
        "seams": [seam_dict(s) for s in view.seams.values()],
        "owners": [owner_dict(o) for o in view.owners.values()],
        "counters": {c.name: counter_dict(c) for c in view.counters.values()},
        "items": {
            "total": items.total,
            "consumed": items.consumed,
            "dropped": items.dropped_total,
            "dropped_by_reason": dict(items.dropped),
        },
        "findings": [f.as_dict() for f in findings(view)],
        **({"detail": _detail(view)} if view.detail.folded else {}),
        **({"flow": _flow(view)} if view.draws_flow else {}),
        "health": {
            "shards": h.shards,
            "events": h.events,
            "tracer_errors": h.tracer_errors,
            "error_messages": list(h.error_messages[:MAX_ERROR_MESSAGES]),
            "truncated_shards": list(h.truncated_shards),
            "bad_lines": h.bad_lines,
            "problems": list(h.problems[:100]),
        },
        "hosts": list(h.hosts),
        "processes": [process_dict(p) for p in h.processes],
    }


def program_dict(view: RunView) -> dict[str, Any]:
    """How the traced program ended: its exit code, its wall time, the sentence the report shows."""
    e = view.ending
    return {"exit_code": e.exit_code, "failed": e.failed,
            "wall_s": round(view.wall_s, 3), "ended": e.sentence or None}


def _flow(view: RunView) -> dict[str, Any]:
    """The stages in the order data moved through them and the producer -> consumer edges."""
    flow = view.flow
    return {"stages": list(flow.stages), "hand_offs": flow.hand_offs,
            "edges": [{"src": e.src, "dst": e.dst, "hops": e.hops, "bytes": e.nbytes,
                       "names": list(e.names)} for e in flow.edges]}


def _detail(view: RunView) -> dict[str, Any]:
    d = view.detail
    return {"hops": d.hops, "folded_hops": d.folded_hops, "steps": len(d.steps),
            "first_step": d.steps[0] if d.steps else None,
            "last_step": d.steps[-1] if d.steps else None,
            "shared_channels": list(d.shared_channels), "note": d.note}


def seam_dict(s: SeamStats) -> dict[str, Any]:
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
        "moved_bytes_per_step": round(s.moved_bytes_per_step, 3),
        "bytes_per_step_max": s.bytes_per_step_max,
        "hops_per_step": round(s.hops_per_step, 3),
        "transports": dict(s.transports),
        "residency_mean_s": s.residency_mean_s,
        "residency_max_s": s.residency_max_s,
        "leaves": [leaf_dict(leaf) for leaf in s.leaves],
    }


def owner_dict(o: OwnerStats) -> dict[str, Any]:
    return {"name": o.name, "role": o.role, "bytes_in": o.bytes_in, "bytes_out": o.bytes_out,
            "hops_in": o.hops_in, "hops_out": o.hops_out, "pids": list(o.pids),
            "hosts": list(o.hosts)}


def process_dict(p: Process) -> dict[str, Any]:
    return {"pid": p.pid, "os_pid": p.os_pid, "host": p.host, "name": p.name,
            "ray_node": p.ray_node, "owners": list(p.owners)}


def counter_dict(c: CounterStats) -> dict[str, Any]:
    return {"count": c.count, "min": c.min, "max": c.max, "mean": c.mean, "last": c.last,
            "owners": list(c.owners), "series": [[round(t, 6), v] for t, v in c.series]}
