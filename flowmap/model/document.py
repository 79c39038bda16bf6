"""The `flowmap report --json` document: the `RunView` serialised, stable, documented, sorted.

`report_document` is the one function that turns the read model into JSON;
the per-record helpers (`seam_dict`, `leaf_dict`, ...) are the one JSON form
of each record, for any other output that embeds one. Its fields are
a contract (docs/report-json.md); add fields, never rename or remove them
without raising `REPORT_SCHEMA`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flowmap.model.types import CounterStats, LeafStats, OwnerStats, SeamStats
from flowmap.model.view import RunView

REPORT_SCHEMA = 1
MAX_ERROR_MESSAGES = 20


def report_document(view: RunView) -> dict[str, Any]:
    items, h = view.items, view.health
    return {
        "flowmap": "report",
        "schema": REPORT_SCHEMA,
        "run": view.path,
        "truncated": view.truncated,
        "projection": dataclasses.asdict(view.projection) if view.projection else None,
        "steps": view.num_steps,
        "seams": [seam_dict(s) for s in view.seams.values()],
        "owners": [owner_dict(o) for o in view.owners.values()],
        "counters": {c.name: counter_dict(c) for c in view.counters.values()},
        "items": {
            "total": items.total,
            "consumed": items.consumed,
            "dropped": items.dropped_total,
            "dropped_by_reason": dict(items.dropped),
        },
        "findings": [f.as_dict() for f in view.findings],
        **({"detail": _detail(view)} if view.detail.folded else {}),
        "health": {
            "shards": h.shards,
            "events": h.events,
            "tracer_errors": h.tracer_errors,
            "error_messages": list(h.error_messages[:MAX_ERROR_MESSAGES]),
            "truncated_shards": list(h.truncated_shards),
            "bad_lines": h.bad_lines,
            "problems": list(h.problems[:100]),
        },
    }


def _detail(view: RunView) -> dict[str, Any]:
    d = view.detail
    return {"hops": d.hops, "folded_hops": d.folded_hops, "steps": len(d.steps),
            "first_step": d.steps[0] if d.steps else None,
            "last_step": d.steps[-1] if d.steps else None,
            "shared_channels": list(d.shared_channels), "note": d.note}


def leaf_dict(leaf: LeafStats) -> dict[str, Any]:
    # a leaf whose rank varied has no shape (null), and says its ranks
    ranks = {"ranks": list(leaf.ranks)} if leaf.ranks is not None else {}
    return {
        **ranks,
        "path": leaf.path,
        "kind": leaf.kind,
        "dtype": leaf.dtype,
        "shape": None if leaf.ranks is not None else _plain(leaf.shape),
        "dims": list(leaf.dims) if leaf.dims else None,
        "bytes": round(leaf.mean_bytes),
        "max_bytes": leaf.max_bytes,
        "total_bytes": leaf.total_bytes,
        "hops": leaf.hops,
    }


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
            "hops_in": o.hops_in, "hops_out": o.hops_out, "pids": list(o.pids)}


def counter_dict(c: CounterStats) -> dict[str, Any]:
    return {"count": c.count, "min": c.min, "max": c.max, "mean": c.mean, "last": c.last,
            "owners": list(c.owners), "series": [[round(t, 6), v] for t, v in c.series]}


def _plain(shape: tuple[Any, ...]) -> list[Any]:
    """JSON's form of a shape: a dim that varied is a `[min, max]` list."""
    return [list(d) if isinstance(d, tuple) else d for d in shape]
