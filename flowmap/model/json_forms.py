"""The one JSON form of a leaf, shared by the networkx graph and every output that embeds leaves.

It lives in the model, below the reporters, because `flowmap.model.graph`
puts leaves on its edges in the same form as `report --json`
(`flowmap.reporters.json_document`) and the HTML page do: one form, written
once, read by layers above and beside it.
"""

from __future__ import annotations

from typing import Any

from flowmap.model.types import LeafStats


def leaf_dict(leaf: LeafStats) -> dict[str, Any]:
    return {
        "path": leaf.path,
        "kind": leaf.kind,
        "dtype": leaf.dtype,
        "shape": plain_shape(leaf.shape),
        "dims": list(leaf.dims) if leaf.dims else None,
        "bytes": round(leaf.mean_bytes),
        "max_bytes": leaf.max_bytes,
        "total_bytes": leaf.total_bytes,
        "hops": leaf.hops,
    }


def plain_shape(shape: tuple[Any, ...]) -> list[Any]:
    """JSON's form of a shape: a dim that varied is a `[min, max]` list."""
    return [list(d) if isinstance(d, tuple) else d for d in shape]
