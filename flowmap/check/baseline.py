"""The baseline file: a snapshot written as small, sorted, diff-friendly JSON.

A reviewer reads the baseline's diff in a pull request, so the file is laid
out for that: one seam per block, one leaf per line-group, keys sorted, short
lists (shapes, dims) on one line, figures rounded. The `"flowmap": "baseline"`
marker and `"schema"` number make a foreign or future file fail loudly
(exit 2) instead of comparing against garbage.
"""

from __future__ import annotations

import json
import os
from typing import Any

from flowmap.check.snapshot import CounterShot, LeafShot, SeamShot, Snapshot
from flowmap.errors import UsageError
from flowmap.model.format import as_shape, parse_seam_label
from flowmap.safe_read import load_json, read_text

MARKER = "baseline"
SCHEMA = 1


def to_dict(snap: Snapshot) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "flowmap": MARKER,
        "schema": SCHEMA,
        "steps": snap.steps,
        "seams": {label: _seam_dict(s) for label, s in sorted(snap.seams.items())},
    }
    if snap.counters is not None:
        doc["counters"] = {
            name: {"count": c.count, "last": c.last, "max": c.max, "mean": c.mean, "min": c.min}
            for name, c in sorted(snap.counters.items())
        }
    if snap.items is not None:
        doc["items"] = snap.items
    return doc


def _seam_dict(s: SeamShot) -> dict[str, Any]:
    return {
        "bytes_per_hop": s.bytes_per_hop,
        "bytes_per_step": s.bytes_per_step,
        "hops_per_step": s.hops_per_step,
        "max_bytes_per_hop": s.max_bytes_per_hop,
        "transports": s.transports,
        "leaves": {path: _leaf_dict(leaf) for path, leaf in sorted(s.leaves.items())},
    }


def _leaf_dict(leaf: LeafShot) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bytes_per_hop": leaf.bytes_per_hop,
        "bytes_per_step": leaf.bytes_per_step,
        "dims": leaf.dims,
        "dtype": leaf.dtype,
        "kind": leaf.kind,
        "shape": leaf.shape,
    }
    if leaf.ranks is not None:  # only where the rank varied: other leaves' lines stay as they were
        out["ranks"] = list(leaf.ranks)
    return out


def dumps(doc: Any, indent: int = 0) -> str:
    """JSON with sorted keys, objects one key per line, lists of scalars on one line."""
    pad = "  " * indent
    if isinstance(doc, dict):
        if not doc:
            return "{}"
        inner = ",\n".join(
            f'{pad}  {json.dumps(str(k))}: {dumps(v, indent + 1)}' for k, v in sorted(doc.items())
        )
        return "{\n" + inner + "\n" + pad + "}"
    if isinstance(doc, list) and any(isinstance(x, dict) for x in doc):
        inner = ",\n".join(f"{pad}  {dumps(v, indent + 1)}" for v in doc)
        return "[\n" + inner + "\n" + pad + "]"
    return json.dumps(doc, separators=(", ", ": "), ensure_ascii=False)


def write(path: str, snap: Snapshot) -> None:
    """Write the baseline at `path` (folders created); a write failure is a usage error."""
    text = dumps(to_dict(snap)) + "\n"
    try:
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)  # a crash never leaves a half-written baseline behind
    except OSError as exc:
        raise UsageError(f"cannot write the baseline {path}: {exc.strerror or exc}") from None


def read(path: str) -> Snapshot:
    """Read a baseline; missing, unreadable, corrupt or foreign files raise UsageError."""
    try:
        text = read_text(path, "baseline")
    except FileNotFoundError:
        raise UsageError(
            f"baseline {path} not found; record one with `flowmap baseline RUN -o {path}`"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"cannot read the baseline {path}: {reason}") from None
    try:
        doc = load_json(text, path, "baseline")
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        raise UsageError(f"{path} is not valid JSON{where}; re-record it with `flowmap baseline`") from None
    return from_dict(doc, path)


def is_baseline(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("flowmap") == MARKER


def from_dict(doc: Any, path: str = "<baseline>") -> Snapshot:
    if not is_baseline(doc):
        raise UsageError(
            f'{path} is not a flowmap baseline (no "flowmap": "baseline" marker); '
            f"record one with `flowmap baseline RUN -o {path}`"
        )
    schema = doc.get("schema")
    if schema != SCHEMA:
        raise UsageError(
            f"{path} has baseline schema {schema!r}; this flowmap reads schema {SCHEMA} — "
            "re-record it with `flowmap baseline`"
        )
    try:
        seams = {label: _seam_from(label, d) for label, d in _dict(doc, "seams").items()}
        counters = None
        if "counters" in doc:
            counters = {n: CounterShot(**c) for n, c in _dict(doc, "counters").items()}
        steps = int(doc.get("steps", 1))
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise UsageError(f"{path} is a damaged flowmap baseline ({_why(exc)}); re-record it") from None
    return Snapshot(steps=steps, seams=seams, counters=counters, items=doc.get("items"), source=path)


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing {exc.args[0]!r}"
    return str(exc).split("\n")[0]


def _dict(d: dict[str, Any], key: str) -> dict[str, Any]:
    v = d.get(key, {})
    if not isinstance(v, dict):
        raise TypeError(f"{key!r} must be an object")
    return v


parse_label = parse_seam_label  # `src -> dst : name` back into its parts


def _ranks(v: Any) -> tuple[int, int] | None:
    """A leaf's `ranks` (files written before it was recorded have none)."""
    if v is None:
        return None
    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v)):
        raise ValueError(f"a leaf's ranks must be [least, largest], not {v!r}")
    return (v[0], v[1])


def _seam_from(label: str, d: dict[str, Any]) -> SeamShot:
    src, dst, name = parse_label(label)
    leaves = {
        path: LeafShot(
            path=path,
            kind=str(ld["kind"]),
            dtype=str(ld.get("dtype", "")),
            shape=as_shape(ld.get("shape", [])),
            dims=tuple(ld["dims"]) if ld.get("dims") else None,
            bytes_per_hop=int(ld["bytes_per_hop"]),
            bytes_per_step=int(ld.get("bytes_per_step", 0)),
            ranks=_ranks(ld.get("ranks")),
        )
        for path, ld in _dict(d, "leaves").items()
    }
    return SeamShot(
        src=src,
        dst=dst,
        name=name,
        bytes_per_step=int(d["bytes_per_step"]),
        bytes_per_hop=int(d.get("bytes_per_hop", 0)),
        max_bytes_per_hop=int(d.get("max_bytes_per_hop", 0)),
        hops_per_step=float(d.get("hops_per_step", 0.0)),
        transports=list(d.get("transports", [])),
        leaves=leaves,
    )
