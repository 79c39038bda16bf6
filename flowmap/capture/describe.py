"""Describe a payload as leaves, from metadata alone.

This runs inside the user's program on every hop, so it is written for speed
and for safety: it never reads tensor data (no `.cpu()`, `.tolist()`, pickling),
never copies, and never lets an exception from a hostile object escape. Every
container walk is bounded in depth and leaf count; lists are folded into one
`[*]` path per field so a batch of 64 trajectories has the same schema as a
batch of 65 — which keeps traces small (schemas are interned) and makes
baselines comparable.

A leaf is a plain tuple, cheap to build and to hash for interning:

    (path, kind, shape, dtype, device, nbytes, count, dims)

`shape` is a tuple of ints; for folded lists a dim that varied between
elements is a `(min, max)` pair. `count` is how many objects the leaf stands
for (1 for a plain leaf).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 8
MAX_LEAVES = 256
# Lists longer than this are sized from a sample and extrapolated; walking a
# 100k-element list on every hop would make capture the bottleneck.
MAX_LIST_SCAN = 2048

Leaf = tuple  # (path, kind, shape, dtype, device, nbytes, count, dims)

_SCALARS = {int: ("int", 8), float: ("float", 8), bool: ("bool", 1), complex: ("complex", 16)}


class _Torch:
    """Lazy handle on torch: only looked up once the user's program imported it."""

    tensor_type: type | None = None

    @classmethod
    def tensor(cls) -> type | None:
        if cls.tensor_type is None:
            torch = sys.modules.get("torch")
            if torch is not None and hasattr(torch, "Tensor"):
                cls.tensor_type = torch.Tensor
        return cls.tensor_type


class Description:
    """The result of describing one payload."""

    __slots__ = ("leaves", "nbytes", "storages")

    def __init__(self, leaves: list[Leaf], nbytes: int, storages: list[tuple[int, str]]):
        self.leaves = leaves
        self.nbytes = nbytes
        # One (data_ptr, device) per tensor/array leaf that stands for one
        # object (count 1, not folded from a list), in leaf order, so later
        # analysis can tell a reference (same storage) from a copy.
        self.storages = storages


class _Walk:
    __slots__ = ("leaves", "spans", "storages", "seen", "dims", "full", "folded")

    def __init__(self, dims: Mapping[str, tuple[str, ...]] | None):
        self.leaves: list[Leaf] = []
        # storage key -> list of (start, end) byte ranges seen in this hop
        self.spans: dict[Any, list[tuple[int, int]]] = {}  # address space -> byte ranges
        self.storages: list[tuple[int, str]] = []
        self.seen: set[int] = set()
        self.dims = dims or {}
        self.full = False
        self.folded = False  # inside a folded list: no per-leaf storage ids


def describe(payload: Any, dims: Mapping[str, tuple[str, ...]] | None = None) -> Description:
    """Describe `payload`; bytes of views that share a storage are counted once."""
    w = _Walk(dims)
    _visit(w, payload, "", 0)
    nbytes = 0
    for leaf in w.leaves:
        kind = leaf[1]
        if kind != "tensor" and kind != "ndarray":
            nbytes += leaf[5]
    for ranges in w.spans.values():
        nbytes += _union_length(ranges) if len(ranges) > 1 else ranges[0][1] - ranges[0][0]
    return Description(w.leaves, nbytes, w.storages)


def _union_length(ranges: list[tuple[int, int]]) -> int:
    if len(ranges) == 1:
        return ranges[0][1] - ranges[0][0]
    total = 0
    end = -1
    for a, b in sorted(ranges):
        if a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def _add(w: _Walk, leaf: Leaf) -> None:
    if len(w.leaves) >= MAX_LEAVES:
        w.full = True
        return
    w.leaves.append(leaf)


def _visit(w: _Walk, obj: Any, path: str, depth: int) -> None:
    try:
        _visit_unsafe(w, obj, path, depth)
    except Exception:
        _add(w, (path, "opaque", (), type(obj).__name__, "", 0, 1, None))


def _visit_unsafe(w: _Walk, obj: Any, path: str, depth: int) -> None:
    t = type(obj)
    tensor_t = _Torch.tensor_type or _Torch.tensor()
    if tensor_t is not None and (t is tensor_t or isinstance(obj, tensor_t)):
        _tensor(w, obj, path)
        return
    scalar = _SCALARS.get(t)
    if scalar is not None:
        _add(w, (path, scalar[0], (), "", "", scalar[1], 1, None))
        return
    if obj is None:
        _add(w, (path, "none", (), "", "", 0, 1, None))
        return
    if t is str:
        _add(w, (path, "str", (len(obj),), "", "", len(obj), 1, None))
        return
    if t is bytes or t is bytearray or t is memoryview:
        n = obj.nbytes if t is memoryview else len(obj)
        _add(w, (path, "bytes", (n,), "", "", n, 1, None))
        return
    if t.__module__ == "numpy" and t.__name__ == "ndarray":
        _ndarray(w, obj, path)
        return
    if depth >= MAX_DEPTH:
        _add(w, (path, "opaque", (), t.__name__, "", 0, 1, None))
        return
    key = id(obj)
    if key in w.seen:
        # A container met twice (a cycle or a shared reference): its bytes
        # were already counted where it first appeared.
        _add(w, (path, "ref", (), t.__name__, "", 0, 1, None))
        return
    w.seen.add(key)
    if t is dict or isinstance(obj, Mapping):
        tensor_t = _Torch.tensor_type
        prefix = f"{path}." if path else ""
        for k, v in obj.items():
            if w.full:
                return
            if type(v) is tensor_t:  # the common case, without the generic dispatch
                try:
                    _tensor(w, v, f"{prefix}{k}")
                    continue
                except Exception:
                    pass
            _visit(w, v, f"{prefix}{k}", depth + 1)
        return
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        for i, v in enumerate(obj):
            _visit(w, v, f"{path}[{i}]", depth + 1)
        return
    if isinstance(obj, (list, tuple, set, frozenset)) and not hasattr(obj, "_fields"):
        _sequence(w, obj, path, depth)
        return
    fields = _fields_of(obj)
    if fields is None:
        _add(w, (path, "opaque", (), t.__name__, "", 0, 1, None))
        return
    for k, v in fields:
        if w.full:
            return
        _visit(w, v, f"{path}.{k}" if path else k, depth + 1)


def _fields_of(obj: Any) -> list[tuple[str, Any]] | None:
    """Attributes of a dataclass, named tuple, slotted or plain object."""
    if hasattr(type(obj), "_fields") and isinstance(obj, tuple):
        return list(zip(type(obj)._fields, obj))  # type: ignore[attr-defined]
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict) and d:
        return [(k, v) for k, v in d.items() if not k.startswith("_")] or list(d.items())
    names: list[str] = []
    for klass in reversed(type(obj).__mro__):  # a subclass lists only its new slots
        slots = klass.__dict__.get("__slots__", ())
        for n in [slots] if isinstance(slots, str) else slots:
            if n not in names and n not in ("__dict__", "__weakref__"):
                names.append(n)
    if names:
        return [(n, getattr(obj, n)) for n in names if hasattr(obj, n)]
    return None


_DTYPE_NAMES: dict[Any, str] = {}
_DEVICE_NAMES: dict[Any, str] = {}


def _tensor(w: _Walk, t: Any, path: str) -> None:
    # Each metadata read costs ~100 ns through torch's Python bindings, and a
    # hop may carry dozens of tensors: read each once, cache the string forms.
    if t.is_cpu:
        device = "cpu"
    else:
        dev = t.device
        device = _DEVICE_NAMES.get(dev) or _DEVICE_NAMES.setdefault(dev, str(dev))
    dtype = _DTYPE_NAMES.get(t.dtype) or _dtype_name(t.dtype)
    nbytes = t.nbytes
    leaves = w.leaves
    if len(leaves) < MAX_LEAVES:
        leaves.append((path, "tensor", t.shape, dtype, device, nbytes, 1,
                       w.dims.get(path) if w.dims else None))
    else:
        w.full = True
    # Live allocations never overlap in one address space, so byte ranges keyed
    # by device dedupe views of one storage without asking for the storage
    # (a second binding call). Meta and sparse tensors have no address: their
    # object identity stands in.
    try:
        start = t.data_ptr() if device != "meta" else 0
    except Exception:
        start = 0
    if start == 0:
        start = id(t) << 64
        device += "#obj"
    spans = w.spans.get(device)
    if spans is None:
        w.spans[device] = [(start, start + nbytes)]
    else:
        spans.append((start, start + nbytes))
    if not w.folded:
        w.storages.append((start, device))


def _dtype_name(dt: Any) -> str:
    name = _DTYPE_NAMES[dt] = str(dt).removeprefix("torch.")
    return name


def _ndarray(w: _Walk, a: Any, path: str) -> None:
    nbytes = int(a.nbytes)
    dims = w.dims.get(path)
    _add(w, (path, "ndarray", tuple(a.shape), str(a.dtype), "cpu", nbytes, 1, dims))
    ptr = a.__array_interface__["data"][0]
    w.spans.setdefault("cpu", []).append((ptr, ptr + nbytes))
    if not w.folded:
        w.storages.append((ptr, "cpu"))


def _sequence(w: _Walk, seq: Any, path: str, depth: int) -> None:
    """Fold a list into `[*]` leaves: one per field path, with count and summed bytes."""
    n = len(seq)
    star = f"{path}[*]"
    if n == 0:
        _add(w, (star, "empty", (0,), "", "", 0, 0, None))
        return
    first = next(iter(seq))
    scalar = _SCALARS.get(type(first))
    if scalar is not None:
        # Lists of numbers (token ids, rewards) are sized by their first
        # element: walking each one would cost a microsecond per element.
        _add(w, (star, scalar[0], (n,), "", "", scalar[1] * n, n, None))
        return
    sub = _Walk(w.dims)
    sub.folded = True
    sub.seen = w.seen
    sub.spans = w.spans
    acc: dict[str, Leaf] = {}
    scanned = 0
    for item in seq:
        if scanned >= MAX_LIST_SCAN:
            break
        sub.leaves = []
        sub.full = False
        _visit(sub, item, star, depth + 1)
        _merge_into(acc, sub.leaves)
        scanned += 1
    merged = list(acc.values())
    if scanned < n:
        scale = n / scanned
        extra = 0.0
        scaled = []
        for leaf in merged:
            if leaf[1] in ("tensor", "ndarray"):
                extra += leaf[5] * (scale - 1)
            scaled.append(leaf[:5] + (int(leaf[5] * scale), int(leaf[6] * scale), leaf[7]))
        merged = scaled
        # The unscanned elements' bytes are an estimate, kept apart from the
        # exact storage spans so views are still counted once.
        w.spans[(id(seq), "extrapolated")] = [(0, int(extra))]
    for leaf in merged:
        _add(w, leaf)


def _merge_into(by_path: dict[str, Leaf], leaves: list[Leaf]) -> None:
    """Merge leaves of equal path: counts and bytes add up, shapes become ranges."""
    for leaf in leaves:
        prev = by_path.get(leaf[0])
        if prev is None:
            by_path[leaf[0]] = leaf
            continue
        shape = _merge_shape(prev[2], leaf[2])
        dtype = prev[3] if prev[3] == leaf[3] else "mixed"
        kind = prev[1] if prev[1] == leaf[1] else "mixed"
        by_path[leaf[0]] = (
            prev[0], kind, shape, dtype, prev[4], prev[5] + leaf[5], prev[6] + leaf[6], prev[7],
        )


def _merge_shape(a: tuple, b: tuple) -> tuple:
    if a == b:
        return a
    if len(a) != len(b):
        return ()
    out = []
    for x, y in zip(a, b):
        lo_x, hi_x = (x, x) if isinstance(x, int) else x
        lo_y, hi_y = (y, y) if isinstance(y, int) else y
        lo, hi = min(lo_x, lo_y), max(hi_x, hi_y)
        out.append(lo if lo == hi else (lo, hi))
    return tuple(out)
