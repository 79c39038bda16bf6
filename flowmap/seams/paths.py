"""Dotted paths into a call's arguments and result: `batch.uid`, `result.advantages`.

A path starts at an argument name (or `result`) and walks mapping keys,
attributes and list indices. Where it meets a list and the next step is a
name, it walks every element: `batch.trajectories.uid` gives one uid per
trajectory. This is how seam maps say where item ids and derived payloads
are, without code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Item ids must be plain values: reading ids out of a tensor would touch its
# data, which capture never does.
_ID_TYPES = (str, int)


def split(path: str) -> tuple[str, list[str]]:
    """`result.logits` -> (`result`, [`logits`])."""
    head, *rest = path.split(".")
    return head, rest


def root(path: str) -> str:
    """The argument (or `result`) a path or leaf path starts at: `result[0].x` -> `result`."""
    return path.split(".", 1)[0].split("[", 1)[0]


def resolve(root: Mapping[str, Any], path: str) -> Any:
    """The value at `path`; a list when the path fanned out over a list. Raises LookupError."""
    head, rest = split(path)
    if head not in root:
        raise LookupError(f"no argument `{head}`")
    return _walk(root[head], rest)


def _walk(value: Any, steps: list[str]) -> Any:
    for i, step in enumerate(steps):
        if step == "*":
            return [_walk(v, steps[i + 1:]) for v in _elements(value)]
        if _is_list(value) and not step.isdigit():
            return [_walk(v, steps[i:]) for v in value]
        value = _step(value, step)
    return value


def _step(value: Any, step: str) -> Any:
    if isinstance(value, Mapping):
        if step in value:
            return value[step]
        if step.isdigit() and int(step) in value:
            return value[int(step)]
        raise LookupError(f"no key `{step}`")
    if step.isdigit() and _is_list(value):
        return value[int(step)]
    try:
        return getattr(value, step)
    except AttributeError:
        raise LookupError(f"no attribute `{step}`") from None


def _is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and not hasattr(value, "_fields")


def _elements(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return list(value.values())
    if _is_list(value):
        return list(value)
    raise LookupError(f"`*` needs a list or mapping, found {type(value).__name__}")


def item_ids(value: Any) -> list[Any]:
    """Flatten what an `items` path found into ids; refuses tensors and arrays."""
    out: list[Any] = []
    _collect(value, out, 0)
    return out


def _collect(value: Any, out: list[Any], depth: int) -> None:
    if isinstance(value, _ID_TYPES) and not isinstance(value, bool):
        out.append(value)
    elif _is_list(value) or isinstance(value, (set, frozenset)):
        if depth > 4:
            raise TypeError("item ids nest deeper than 4 lists")
        for v in value:
            _collect(v, out, depth + 1)
    elif value is None:
        return
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        raise TypeError(
            f"item ids at a {type(value).__name__}: flowmap never reads tensor data; "
            "point `items` at a list of ids"
        )
    else:
        out.append(str(value))
