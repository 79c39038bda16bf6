"""tensordict: TensorDict, lazy stacks, tensorclasses, and their non-tensor leaves.

A TensorDict is walked as the dict it stores (`_tensordict`), so its paths are
its keys (`obs.pixels`), not its private fields. `NonTensorData` is the value
it wraps (a string is a `str` leaf with its UTF-8 bytes); a `NonTensorStack` or
any lazy stack is a folded list of its members (`prompt[*]`). A tensorclass is
its tensor fields plus its non-tensor fields.
"""

from __future__ import annotations

from typing import Any

from flowmap.capture.describers import introspect
from flowmap.capture.describers.containers import walk_dict
from flowmap.capture.describers.list_sample import sample_list
from flowmap.capture.describers.walk import Walk, enter, register_resolver, visit


def _fields(obj: Any) -> dict[str, Any]:
    d = introspect.instance_dict(obj)
    if d is None:
        raise TypeError("no instance dict")
    return d


def tensordict(w: Walk, td: Any, path: str, depth: int) -> None:
    store = _fields(td)["_tensordict"]
    if type(store) is not dict:
        raise TypeError("unexpected TensorDict storage")
    if enter(w, td, path, depth):
        walk_dict(w, store, path, depth)


def lazy_stack(w: Walk, stack: Any, path: str, depth: int) -> None:
    members = _fields(stack)["tensordicts"]
    if type(members) is not list:
        raise TypeError("unexpected stack storage")
    if enter(w, stack, path, depth):
        sample_list(w, list.__len__(members), lambda i: list.__getitem__(members, i), path, depth)


def tensorclass(w: Walk, tc: Any, path: str, depth: int) -> None:
    d = _fields(tc)
    tensors, others = d.get("_tensordict"), d.get("_non_tensordict")
    if not enter(w, tc, path, depth):
        return
    if others is not None and type(others) is dict and _is_non_tensor_data(type(tc)):
        visit(w, others.get("data"), path, depth + 1)  # the wrapped value, at this path
        return
    if tensors is not None:
        inner = _fields(tensors).get("_tensordict")
        if type(inner) is dict:
            walk_dict(w, inner, path, depth)
    if type(others) is dict:
        walk_dict(w, others, path, depth)


def _is_non_tensor_data(t: type) -> bool:
    return any(introspect.type_name(k) == "NonTensorDataBase" for k in introspect.mro(t))


def resolve(t: type, mro: tuple[type, ...]) -> Any:
    modules = [introspect.type_module(k) for k in mro]
    if not any(m.startswith("tensordict") for m in modules):
        return None
    names = {introspect.type_name(k) for k in mro}
    if "LazyStackedTensorDict" in names:
        return lazy_stack
    if "TensorDict" in names:
        return tensordict
    if "TensorClass" in names or introspect.class_attr(t, "_is_tensorclass") is True:
        return tensorclass
    return None


register_resolver(resolve)
