"""The one set of text helpers every output uses: bytes, shapes, schemas, seam labels.

A shape reads the same in the terminal, a finding, a Perfetto slice and a
`check` failure because it is written here once. Dims are ints or `(min,
max)` tuples (see `flowmap.model.types.Dim`); a list pair from an old
caller reads the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from flowmap.model.types import Dim, LeafStats, SeamKey, Shape, seam_label
from flowmap.units import fmt_bytes

__all__ = [
    "as_dim", "as_shape", "fmt_bytes", "fmt_dim", "fmt_dims", "fmt_named_schema", "fmt_named_shape",
    "fmt_leaf_schema", "fmt_per_step", "fmt_schema", "leaf_label", "parse_seam_label", "role_label", "seam_label",
]


role_label = seam_label  # a role-level key reads the same: `rollout -> ready_buffer : trajectory`


def parse_seam_label(label: str) -> SeamKey:
    """`src -> dst : name` back into its parts (the inverse of `seam_label`)."""
    src, sep, rest = label.partition(" -> ")
    dst, sep2, name = rest.partition(" : ")
    if not sep or not sep2:
        raise ValueError(f"seam key {label!r} is not 'src -> dst : name'")
    return src, dst, name


def fmt_per_step(n: float, stepped: bool = True) -> str:
    """`5.00 MiB/step`; `5.00 MiB total` for a run without steps (its "per step" is the total)."""
    return f"{fmt_bytes(n)}/step" if stepped else f"{fmt_bytes(n)} total"


NO_STEPS = "no steps (figures are run totals)"


def fmt_steps(num_steps: int) -> str:
    """`12 steps`, `1 step`, or, for a run that never had one, what its figures are."""
    if num_steps <= 0:
        return NO_STEPS
    return f"{num_steps:,} step" + ("" if num_steps == 1 else "s")


def as_dim(d: Any) -> Dim:
    """An int stays an int; a `[min, max]` pair (JSON, old records) becomes a tuple."""
    if isinstance(d, (list, tuple)):
        return (int(d[0]), int(d[1]))
    return int(d)


def as_shape(shape: Iterable[Any]) -> Shape:
    return tuple(as_dim(d) for d in shape)


def fmt_dim(d: Dim | Sequence[int]) -> str:
    """`8`, or `10..12` for a dim that varied."""
    if isinstance(d, int):
        return str(d)
    return f"{d[0]}..{d[1]}"


def fmt_dims(shape: Iterable[Dim]) -> str:
    """`8×10..12` (no brackets)."""
    return "×".join(fmt_dim(d) for d in shape)


def fmt_schema(dtype: str, shape: Shape) -> str:
    """`int64[8×10..12]`, or just the dtype (or kind) for a scalar."""
    return f"{dtype}[{fmt_dims(shape)}]" if shape else dtype


def fmt_leaf_schema(leaf: LeafStats) -> str:
    """`fmt_schema` of a merged leaf; `int64[rank 1..2]` where hops gave it different ranks."""
    dtype = leaf.dtype or leaf.kind
    if leaf.ranks is not None:
        return f"{dtype}[rank {leaf.ranks[0]}..{leaf.ranks[1]}]"
    return fmt_schema(dtype, leaf.shape)


def fmt_named_shape(shape: Shape, dims: Sequence[str] | None) -> str:
    """`[B=8, T=10..12]`: dims named where the hop named them, ranges for dims that varied."""
    out = []
    for i, d in enumerate(shape):
        name = dims[i] if dims and i < len(dims) else None
        out.append(f"{name}={fmt_dim(d)}" if name else fmt_dim(d))
    return "[" + ", ".join(out) + "]"


def fmt_named_schema(dtype: str, shape: Shape, dims: Sequence[str] | None) -> str:
    """`int64 [B=8, T=10..12]`, or the dtype (or kind) alone for a scalar."""
    return f"{dtype} {fmt_named_shape(shape, dims)}" if shape else dtype


def leaf_label(payload: str, path: str) -> str:
    """`batch.advantages`: the payload name, then the leaf path inside it."""
    if not path:
        return payload
    return f"{payload}{path}" if path.startswith("[") else f"{payload}.{path}"
