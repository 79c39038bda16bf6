"""numpy arrays (and subclasses such as `np.memmap`) and numpy scalars.

An array's bytes are the buffer bytes it references: its `nbytes`, or less
when its strides revisit memory (`np.broadcast_to`). A memmap is an array
whose buffer is the mapping, so a 64 MB memmap is 64 MB. Arrays share the
`cpu` address space with CPU tensors, so `torch.from_numpy(a)` next to `a`
counts once.

An object array (verl's `non_tensor_batch` of strings) holds pointers; its
bytes are its elements' content (a string's UTF-8 length, an array's bytes...),
from an evenly spaced sample when it is long, extrapolated.

Every read goes through `np.ndarray`'s own descriptors, so a subclass's
overridden properties or `__array_finalize__` never run.
"""

from __future__ import annotations

import sys
from typing import Any

from flowmap.capture.describers import accel, introspect
from flowmap.capture.describers.walk import (
    MAX_LEAVES,
    MAX_STORAGES,
    Walk,
    cached_name,
    register_resolver,
)

_ND: dict[str, Any] = {}
_DTYPE_NAMES: dict[Any, str] = {}


def _bind() -> dict[str, Any]:
    if not _ND:
        nd = sys.modules["numpy"].ndarray
        got = {name: nd.__dict__[name] for name in ("shape", "strides", "dtype", "nbytes", "size",
                                                    "__array_interface__")}
        _ND.update(got, item=nd.item, type=nd)  # at once: a hop in another thread reads it
    return _ND


def _dtype_name(dt: Any) -> str:
    return cached_name(_DTYPE_NAMES, dt)


def array_span(shape: Any, strides: Any, itemsize: int) -> tuple[int, int]:
    """(lowest byte offset, span in bytes) of a strided buffer; negative strides allowed."""
    lo = hi = 0
    for n, s in zip(shape, strides):
        if n == 0:
            return 0, 0
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi - lo + itemsize


def ndarray_handler(w: Walk, a: Any, path: str, depth: int) -> None:
    nd = _ND or _bind()
    if type(a) is nd["type"] and _plain_vector(w, a, path):
        return
    shape = tuple(nd["shape"].__get__(a))
    dtype = nd["dtype"].__get__(a)
    read = accel.array_data  # read here: the tests turn the C reader off
    ptr = read(a, nd["type"]) if read is not None else None
    if ptr is None:  # a subclass (np.memmap), or no C reader: the interface dict numpy builds
        ptr = nd["__array_interface__"].__get__(a)["data"][0]
    dims = w.dims.get(path) if w.dims else None
    if dtype.hasobject:
        nbytes = _object_content(w, a, nd, path, depth)  # already added to the hop's bytes
    else:
        lo, span = array_span(shape, nd["strides"].__get__(a), dtype.itemsize)
        nbytes = min(nd["nbytes"].__get__(a), span)
        w.piece("cpu", ptr + lo, ptr + lo + span, nbytes)
    w.add((path, "ndarray", shape, _dtype_name(dtype), "cpu", nbytes, 1, dims))
    w.storage(ptr, "cpu", a)


def _plain_vector(w: Walk, a: Any, path: str) -> bool:
    """An exact 1-D array of numbers (an observation, a row of rewards): the leaf recorded
    with the walk's calls inlined, as the general path records it. False for any other.

    Its type is exactly ndarray, so `a.shape` and the rest are ndarray's own descriptors
    (nothing overridden runs), read without looking them up."""
    read = accel.array_data
    shape = a.shape
    if read is None or len(shape) != 1:
        return False
    dtype = a.dtype
    if dtype.hasobject:
        return False
    ptr = read(a, type(a))
    if ptr is None:
        return False
    n, itemsize = shape[0], dtype.itemsize
    stride = a.strides[0]
    if n == 0:
        lo = span = 0
    elif stride >= 0:
        lo, span = 0, (n - 1) * stride + itemsize
    else:
        lo, span = (n - 1) * stride, (1 - n) * stride + itemsize
    nbytes = min(a.nbytes, span)
    start = ptr + lo
    pieces = w.pieces.get("cpu")
    if pieces is None:
        w.pieces["cpu"] = [(start, start + span, nbytes)]
    else:
        pieces.append((start, start + span, nbytes))
    name = _DTYPE_NAMES.get(dtype) or _dtype_name(dtype)
    if len(w.leaves) < MAX_LEAVES:
        w.leaves.append((path, "ndarray", shape, name, "cpu", nbytes, 1,
                         w.dims.get(path) if w.dims else None))
    else:
        w.full = True
    if len(w.storages) < MAX_STORAGES:
        w.storages.append(ptr)
        w.holders.append(a)
    return True


def _object_content(w: Walk, a: Any, nd: dict[str, Any], path: str, depth: int) -> int:
    """Bytes of an object array's elements, each sized as it would be on its own."""
    from flowmap.capture.describers.list_sample import sample

    n = nd["size"].__get__(a)
    if n == 0:
        return 0
    item = nd["item"]
    _, total = sample(w, n, lambda i: item(a, i), f"{path}[*]", depth)
    return total


def _scalar_handler(w: Walk, x: Any, path: str, depth: int) -> None:
    dt = sys.modules["numpy"].generic.__dict__["dtype"].__get__(x)
    w.leaf(path, "scalar", (), _dtype_name(dt), dt.itemsize)


def resolve(t: type, mro: tuple[type, ...]) -> Any:
    np = sys.modules.get("numpy")
    if np is None:
        return None
    if introspect.has_base(t, np.ndarray):
        return ndarray_handler
    if introspect.has_base(t, np.generic) and not introspect.has_base(t, np.object_):
        return _scalar_handler
    return None


register_resolver(resolve)
