"""Which functions of `torch.distributed.distributed_c10d` move data, read from torch itself.

A hand-kept list goes blind the day torch renames a function (torch 2.13's FSDP2
calls `all_gather_single` and `reduce_scatter_single`, names an older list did
not have). So the ops are enumerated from the module's `__all__` and each
function's signature, by the parameter names c10d uses throughout:

- a function with a `group` parameter and a payload parameter (a tensor, a list
  of tensors, objects) moves data; one without a payload (`get_rank`,
  `destroy_process_group`, `barrier`) does not;
- `send`/`recv` in the name, with a `tag`: point to point (`send`, `isend`,
  `recv`, `irecv`); object p2p (`send_object_list`) is recorded through the
  `send`/`recv` calls it makes;
- a `src` parameter: a rooted op (the root sends, the others receive:
  `broadcast`, `scatter`, `broadcast_object_list`, `scatter_object_list`);
- otherwise a collective in which every rank sends its input (`all_reduce`,
  `all_gather_single`, `reduce_scatter_single`, `all_to_all_single`, `reduce`
  and `gather` to a `dst`, the `*_coalesced` forms, `all_gather_object`).

What a rank sends is the parameter named as input (`input`, `input_tensor`,
`input_list`, `scatter_list`, `scatter_object_input_list`), else the in-place
one (`tensor`, `tensors`, `obj`, `object_list`); what a non-root receives is
the output one (`scatter_object_output_list`), else the in-place one.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, NamedTuple

Where = tuple[int, str]  # (position, name) of a parameter


class Op(NamedTuple):  # not a slotted frozen dataclass: building that class cost ~1.6 ms a process
    name: str
    kind: str  # "collective", "rooted" or "p2p"
    sent: Where | None  # what this rank sends (the root's, for a rooted op)
    got: Where | None  # what a non-root receives (rooted ops)
    group: Where
    root: Where | None  # `src` (rooted) or the peer (`dst`/`src`, p2p)
    objects: bool  # pickled objects: bytes are the pickled size torch measured


IN_PLACE = ("tensor", "tensors", "obj", "object_list")


def ops(c10d: Any) -> dict[str, Op]:
    """Every data-moving function `c10d` exports, by name."""
    found: dict[str, Op] = {}
    names = vars(c10d)  # not getattr: a deprecated name (`reduce_op`) warns when got
    for name in names.get("__all__", ()):
        fn = names.get(name)
        if type(fn) is not types.FunctionType:  # not isinstance: `reduce_op` warns on it
            continue
        params = parameters(fn)
        if params is None:
            continue
        op = classify(name, params)
        if op is not None:
            found[name] = op
    return found


def parameters(fn: Any) -> list[str] | None:
    """The names of `fn`'s parameters, in `inspect.signature`'s order, or None.

    Read from the code object of the function `functools.wraps` wrapped (c10d's
    functions are decorated): each traced process enumerates c10d's 55 functions when
    `torch.distributed` loads, and with a `Signature` built for each `ops()` took
    0.9 ms a process, 0.4 ms this way. A function that states its own `__signature__`
    goes through `inspect`.
    """
    try:
        inner = inspect.unwrap(fn, stop=lambda f: hasattr(f, "__signature__"))
        code = getattr(inner, "__code__", None)
        if type(inner) is not types.FunctionType or code is None or hasattr(inner, "__signature__"):
            return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    n, k = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    rest = n + k  # after the named parameters: *args, then **kwargs
    star = [names[rest]] if code.co_flags & inspect.CO_VARARGS else []
    rest += len(star)
    stars = [names[rest]] if code.co_flags & inspect.CO_VARKEYWORDS else []
    return [*names[:n], *star, *names[n : n + k], *stars]


def classify(name: str, params: list[str]) -> Op | None:
    """The op a function of this name and these parameters is, or None if it moves no data."""
    at = {p: (i, p) for i, p in enumerate(params)}
    if "group" not in at:
        return None
    objects = "object" in name
    if "send" in name or "recv" in name:
        if "tag" not in at or "tensor" not in at:
            return None  # object p2p: recorded through the send/recv calls it makes
        peer = at.get("dst") or at.get("src")
        return Op(name, "p2p", at["tensor"], None, at["group"], peer, False)
    sent = _first(at, lambda p: p.startswith("input") or p.endswith("input_list")
                  or p == "scatter_list") or _in_place(at)
    if sent is None:
        return None  # nothing to send: a query or a barrier
    if "src" in at:
        got = _first(at, lambda p: p.endswith("output_list") or p == "output") or _in_place(at)
        return Op(name, "rooted", sent, got, at["group"], at["src"], objects)
    return Op(name, "collective", sent, None, at["group"], None, objects)


def _in_place(at: dict[str, Where]) -> Where | None:
    """The in-place payload, in `IN_PLACE`'s order (`all_gather_object(object_list, obj)`
    sends `obj`)."""
    for p in IN_PLACE:
        if p in at:
            return at[p]
    return None


def _first(at: dict[str, Where], want: Any) -> Where | None:
    for p, where in at.items():
        if want(p):
            return where
    return None
