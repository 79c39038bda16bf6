"""What discovery keeps of the calls it watched: counts, bytes, leaves, nesting, as plain data.

Nothing here holds a payload. A call that carries a tensor or an array is
described by `flowmap.capture.describe` (metadata only); storages are kept as
integer addresses, and only while the call runs, so that a nested call can be
told to carry part of its caller's payload; a run with no seam map also keeps weak
references (which keep nothing alive) to the arrays a call made. Everything else is counters keyed
by strings, ready to be written as JSON and merged across processes.
"""

from __future__ import annotations

import itertools
import sys
import weakref
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Flags of one enclosing call, as seen from a nested candidate call.
SAME_SELF = 1  # a method of the same object: the payload moves inside one class
SHARES = 2  # the nested call's arguments share a storage with the enclosing call's
NOTHING_NEW = 4  # the nested call returned no storage its arguments or the enclosing call's lacked
PASS_THROUGH = 8  # the nested call returned one of its arguments, as it was given

MAX_CHAIN = 12  # enclosing watched calls kept per context
MAX_FOUND = 64  # tensors a pre-check collects from one value
_SCAN = 16  # elements or fields a pre-check looks at per container
MAX_MADE = 65_536  # arrays `remember_made` keeps weak references to, in all


def find_tensors(value: Any, out: list[Any], depth: int = 0) -> bool:
    """Cheap pre-check: does `value` carry a tensor or an ndarray? Collects them into `out`.

    It looks into mappings, lists, tuples and data classes (dataclass, attrs),
    bounded in depth and breadth, and not into other objects: a trainer or a
    model passed as an argument holds tensors, but is not a payload, and
    neither is a module's `Parameter`. The collected references live only
    until the caller clears `out`, which it does before its hook returns.
    """
    t = type(value)
    if t in _SCALARS or value is None:
        return False
    kinds = _kinds()
    if kinds and isinstance(value, kinds[0]):
        if isinstance(value, kinds[1]):
            return False  # a module's parameter: weights stay with their module
        if len(out) < MAX_FOUND:
            out.append(value)
        return True
    if t.__name__ == "ndarray" and t.__module__ == "numpy":
        if len(out) < MAX_FOUND:
            out.append(value)
        return True
    if depth >= 3:
        return False
    return any([find_tensors(v, out, depth + 1) for v in _children(value, t)])


def _children(value: Any, t: type) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value[:_SCAN])
    if isinstance(value, Mapping) or (hasattr(t, "__getitem__") and callable(getattr(t, "values", None))
                                      and callable(getattr(t, "keys", None))):
        try:
            return list(itertools.islice(value.values(), _SCAN))
        except Exception:
            return []
    fields = getattr(t, "__dataclass_fields__", None) or getattr(t, "__attrs_attrs__", None)
    if fields is None:
        return []
    names = list(fields)[:_SCAN] if isinstance(fields, dict) else [a.name for a in fields][:_SCAN]
    return [getattr(value, n, None) for n in names]


_SCALARS = frozenset({int, float, bool, str, bytes, complex, type})
_KINDS: list[tuple[type, type]] = []


def _kinds() -> tuple[type, type] | None:
    """(torch.Tensor, torch.nn.Parameter), once the program imported torch."""
    if not _KINDS:
        torch = sys.modules.get("torch")
        if torch is None or not hasattr(torch, "nn") or not hasattr(torch.nn, "Parameter"):
            return None
        _KINDS.append((torch.Tensor, torch.nn.Parameter))
    return _KINDS[0]


MAX_GIVEN = 8  # identities kept per argument: enough to tell a few models apart


def is_given(value: Any) -> bool:
    """An object a call was given that is no payload and no plain value: a model, a client."""
    if value is None or type(value) in _SCALARS:
        return False
    if isinstance(value, (list, tuple, dict, set, frozenset, type)) or callable(value) and \
            not hasattr(value, "__dict__"):
        return False
    return not getattr(type(value), "__module__", "").startswith("builtins")


def is_nn_module(obj: Any) -> bool:
    """Model code: its methods compute on the payload inside one owner, they hand nothing over."""
    torch = sys.modules.get("torch")
    nn = getattr(torch, "nn", None)
    return nn is not None and isinstance(obj, nn.Module)


def storage_ids(found: list[Any]) -> frozenset[int]:
    """The base storage address of every collected tensor (views of one storage share it)."""
    out = set()
    for t in found:
        try:
            if hasattr(t, "untyped_storage"):
                out.add(t.untyped_storage().data_ptr())
            else:  # an ndarray: the buffer of its base
                base = t
                while getattr(base, "base", None) is not None:
                    base = base.base
                out.add(base.__array_interface__["data"][0])
        except Exception:
            out.add(id(t))
    out.discard(0)
    return frozenset(out)


@dataclass(slots=True)
class CodeStats:
    """Everything seen of one function's calls in one process."""

    calls: int = 0  # every call while watching
    candidate_calls: int = 0  # calls whose arguments or result carried a tensor
    call_bytes: int = 0
    result_bytes: int = 0
    max_bytes: int = 0
    args: Counter[str] = field(default_factory=Counter)  # argument -> calls it carried data
    result_calls: int = 0  # calls whose result carried data
    leaves: dict[str, list[Any]] = field(default_factory=dict)  # path -> [kind, dtype, shape]
    contexts: Counter[tuple[tuple[str, int], ...]] = field(default_factory=Counter)
    delegated_to: Counter[str] = field(default_factory=Counter)  # caller that returned our result
    # per argument given besides the payload (or `self`): distinct identities seen (ids in
    # this process while watching, counts once written), and torch's grad modes seen
    given: dict[str, Any] = field(default_factory=dict)
    grad_modes: set[bool] = field(default_factory=set)

    def see_given(self, name: str, ident: int) -> None:
        ids = self.given.setdefault(name, set())
        if isinstance(ids, set) and len(ids) < MAX_GIVEN:
            ids.add(ident)

    def distinct_given(self) -> dict[str, int]:
        return {k: (len(v) if isinstance(v, set) else int(v)) for k, v in self.given.items()}

    def add_leaves(self, prefix: str, leaves: list[tuple[Any, ...]]) -> None:
        if len(self.leaves) > 256:
            return
        for leaf in leaves:
            path = f"{prefix}.{leaf[0]}" if leaf[0] and prefix else (leaf[0] or prefix)
            if path not in self.leaves:
                shape = [d if isinstance(d, int) else list(d) for d in leaf[2]]
                self.leaves[path] = [leaf[1], leaf[3], shape]

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls, "candidate_calls": self.candidate_calls,
            "call_bytes": self.call_bytes, "result_bytes": self.result_bytes,
            "max_bytes": self.max_bytes, "args": dict(self.args),
            "result_calls": self.result_calls, "leaves": self.leaves,
            "contexts": [[[list(a) for a in chain], n] for chain, n in self.contexts.items()],
            "delegated_to": dict(self.delegated_to),
            "given": self.distinct_given(), "grad_modes": sorted(self.grad_modes),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CodeStats:
        s = cls(d["calls"], d["candidate_calls"], d["call_bytes"], d["result_bytes"],
                d["max_bytes"], Counter(d["args"]), d["result_calls"], dict(d["leaves"]))
        for chain, n in d["contexts"]:
            s.contexts[tuple((a[0], int(a[1])) for a in chain)] += n
        s.delegated_to.update(d["delegated_to"])
        s.given = {k: int(v) for k, v in d.get("given", {}).items()}
        s.grad_modes = {bool(g) for g in d.get("grad_modes", ())}
        return s

    def merge(self, o: CodeStats) -> None:
        self.calls += o.calls
        self.candidate_calls += o.candidate_calls
        self.call_bytes += o.call_bytes
        self.result_bytes += o.result_bytes
        self.max_bytes = max(self.max_bytes, o.max_bytes)
        self.args.update(o.args)
        self.result_calls += o.result_calls
        for k, v in o.leaves.items():
            self.leaves.setdefault(k, v)
        self.contexts.update(o.contexts)
        self.delegated_to.update(o.delegated_to)
        mine, theirs = self.distinct_given(), o.distinct_given()
        self.given = {k: max(mine.get(k, 0), theirs.get(k, 0)) for k in {*mine, *theirs}}
        self.grad_modes |= o.grad_modes


def remember_made(made: list[tuple[Callable[[], Any], str]], key: str, found: list[Any],
                  given: frozenset[int]) -> None:
    """Add weak references to the arrays a call (`key`) returned and was not given: the
    data it made (`Watcher.made`, at most MAX_MADE)."""
    for value in found:
        if len(made) >= MAX_MADE:
            return
        try:
            if not storage_ids([value]) <= given:
                made.append((weakref.ref(value), key))
        except Exception:  # not weakly referable; never into the program (a profile hook)
            continue
