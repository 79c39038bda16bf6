"""torch tensors: plain, views, subclasses, sparse and nested, from metadata alone.

A tensor's bytes are the storage bytes it references: `numel × itemsize` for a
dense tensor, less for one whose strides revisit memory (an `expand`ed tensor
over a 4-byte storage is 4 bytes, not its logical 400 MB). Its piece spans
`data_ptr .. data_ptr + span`, so views of one storage in a hop count once.

Subclasses (and every tensor while a TorchFunctionMode is active) are read
through `torch._C.TensorBase`'s own descriptors with torch-function dispatch
off, so no `__torch_function__` and no overridden property runs.

Sparse tensors are the sum of their components (COO: values and indices;
compressed: values and the two index tensors). Nested tensors are their packed
values plus offsets (jagged) or their buffer plus size/stride/offset
metadata (strided).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from itertools import islice
from typing import Any

from flowmap.capture.describers import introspect
from flowmap.capture.describers.accel import tensor_entries
from flowmap.capture.describers.walk import (
    FAST,
    MAX_KEY_CHARS,
    MAX_LEAVES,
    MAX_STORAGES,
    Piece,
    Walk,
    cached_name,
    join,
    register,
    register_resolver,
    visit,
)

_DTYPE_NAMES: dict[Any, str] = {}
# (name, bytes per element) of each dtype named, for the C loop: it counts a contiguous tensor's
# bytes from its shape with it, as torch does, instead of asking torch for `nbytes`.
_DTYPES: dict[Any, tuple[str, int]] = {}
# The C loop's last leaf per path: a candidate it hands out again only where every field is equal.
_KNOWN: dict[str, Any] = {}
_DEVICE_NAMES: dict[Any, str] = {}
_T: dict[str, Any] = {}  # torch handles, filled by bind()

COMPONENTS = {
    "sparse_coo": ("_values", "_indices"),
    "sparse_csr": ("values", "crow_indices", "col_indices"),
    "sparse_bsr": ("values", "crow_indices", "col_indices"),
    "sparse_csc": ("values", "ccol_indices", "row_indices"),
    "sparse_bsc": ("values", "ccol_indices", "row_indices"),
}


def bind() -> Any:
    """Register tensor handling once torch is imported; returns (mode-enabled check, guard)."""
    torch = sys.modules["torch"]
    base = torch._C.TensorBase
    _T.update(
        Tensor=torch.Tensor, base=base, strided=torch.strided, no_subclass=torch._C.DisableTorchFunctionSubclass,
        dtype_type=torch.dtype,
        **{name: base.__dict__[name] for name in ("shape", "dtype", "device", "nbytes", "is_cpu", "layout",
                                                  "is_nested")},
    )
    _T["readers"] = _readers(torch.Tensor, base)
    register(torch.Tensor, tensor_leaf)
    register(torch.nn.Parameter, subclass_handler)
    FAST[0] = tensor_dict
    return torch._C._is_torch_function_mode_enabled, torch._C.DisableTorchFunction


READS = ("data_ptr", "is_cpu", "is_contiguous", "shape", "dtype")


def _readers(tensor: type, base: type) -> tuple[Any, ...]:
    """What `t.data_ptr`, `t.is_cpu`... resolve to on an exact `tensor`: the C loop calls these
    directly. Empty (the C loop declines) if a class above the base overrides one of them."""
    above = tensor.__mro__[: tensor.__mro__.index(base)]
    if any(name in vars(cls) for cls in above for name in READS):
        return ()
    return tuple(vars(base)[name] for name in READS)


def _dtype_name(dt: Any) -> str:
    facts = _DTYPES.get(dt)
    if facts is not None:
        return facts[0]
    name = cached_name(_DTYPE_NAMES, dt, "torch.")
    size = getattr(dt, "itemsize", None) if type(dt) is _T.get("dtype_type") else None
    if type(size) is int and size > 0:
        _DTYPES[dt] = (name, size)
    return name


def device_name(dev: Any) -> str:
    """A device as storages are keyed on it (`tensor_leaf`)."""
    return cached_name(_DEVICE_NAMES, dev)


_device_name = device_name


def tensor_leaf(w: Walk, t: Any, path: str, depth: int = 0) -> None:
    """An exact `torch.Tensor`: the hot path, inlined (each binding call costs ~100 ns).
    It is the tensor's handler itself (`depth` unused: a tensor is a leaf), a frame less
    for each tensor in a tuple or list."""
    try:
        ptr = t.data_ptr()
        shape = t.shape
    except Exception:  # sparse, strided nested, or storage-less: the slow path
        _unusual(w, t, path)
        return
    device = "cpu" if t.is_cpu else _device_name(t.device)
    facts = _DTYPES.get(t.dtype)
    dtype = facts[0] if facts is not None else _dtype_name(t.dtype)
    nbytes = span = t.nbytes
    if not t.is_contiguous():
        nbytes, span = _strided_bytes(shape, t.stride(), nbytes)
    if ptr == 0 or device == "meta":  # no address (a meta view's data_ptr is its offset alone)
        _emit(w, path, shape, dtype, device, nbytes, span, 0, t)
        return
    leaves = w.leaves
    if len(leaves) < MAX_LEAVES:
        leaves.append((path, "tensor", shape, dtype, device, nbytes, 1,
                       w.dims.get(path) if w.dims else None))
    else:
        w.full = True
    pieces = w.pieces.get(device)
    if pieces is None:
        w.pieces[device] = [(ptr, ptr + span, nbytes)]
    else:
        pieces.append((ptr, ptr + span, nbytes))
    if len(w.storages) < MAX_STORAGES:
        w.storages.append(ptr if device == "cpu" else (ptr, device))
        w.holders.append(t)


def tensor_dict(w: Walk, d: dict[Any, Any], path: str, depth: int) -> None:
    """The entries of a dict, its exact CPU tensors read inline: the common hop's hot loop.

    Per tensor it reads what the leaf needs and nothing more (data_ptr, is_cpu,
    is_contiguous, shape, dtype, nbytes: 30-80 ns each, the floor of a hop) and
    appends to the walk's lists directly; anything else (a GPU, strided or
    storage-less tensor, a value of another type) goes the general way. Nothing
    is cached per tensor: a tensor's shape can change in place between hops.
    A top-level key is its own path (no new string), so a seam's schema
    compares equal to its last one mostly by identity.
    """
    if w.full:  # MAX_LEAVES, or HARD_NODES (visit sets `full` there)
        return
    tensor_t = _T["Tensor"]
    prefix = f"{path}." if path else ""
    leaves = w.leaves
    room = MAX_LEAVES - len(leaves)
    dims = w.dims
    dtypes = _DTYPES
    cpu: list[Piece] = []  # this dict's inline pieces, joined to the walk's at the end
    kept = len(w.storages) < MAX_STORAGES  # past it, a dict's storages are not kept
    storages = w.storages if kept else []
    holders = w.holders if kept else []
    entries: Iterable[tuple[Any, Any]]
    if tensor_entries is not None:  # the loop below, in C, up to the first entry it leaves
        taken, full = tensor_entries(d, tensor_t, _T["readers"], dtypes, prefix, MAX_KEY_CHARS, dims,
                                     leaves, cpu, storages, room, _KNOWN, holders)
        if full or taken == dict.__len__(d):
            w.full = full == 1  # it was False: checked on entry
            w.nodes += len(cpu)  # `_joined`, inlined: this is the common hop's return
            if cpu:
                have = w.pieces.get("cpu")
                if have is None:
                    w.pieces["cpu"] = cpu
                else:
                    have.extend(cpu)
            return
        entries = islice(dict.items(d), taken, None) if taken else dict.items(d)
        room = MAX_LEAVES - len(leaves)
    else:
        entries = dict.items(d)
    for k, v in entries:
        if type(v) is tensor_t:
            try:
                ptr = v.data_ptr()
                if ptr and v.is_cpu and v.is_contiguous():
                    if type(k) is str and len(k) <= MAX_KEY_CHARS:
                        p = prefix + k if prefix else k
                    else:
                        p = join(path, k)
                    shape = v.shape
                    # a dtype not named yet raises KeyError: the general path names it
                    dtype = dtypes[v.dtype][0]
                    nbytes = v.nbytes
                    cpu.append((ptr, ptr + nbytes, nbytes))
                    storages.append(ptr)
                    holders.append(v)
                    if room:
                        room -= 1
                        leaves.append((p, "tensor", shape, dtype, "cpu", nbytes, 1,
                                       dims.get(p) if dims else None))
                        continue
                    w.full = True  # one past the leaf bound: its bytes count, the walk stops
                    break
            except Exception:
                pass
        p = join(path, k)
        if type(v) is tensor_t:
            try:
                tensor_leaf(w, v, p)
                w.nodes += 1
            except Exception:
                visit(w, v, p, depth + 1)
        else:
            visit(w, v, p, depth + 1)  # counts its own nodes
        if w.full:
            break
        room = MAX_LEAVES - len(leaves)
    _joined(w, cpu)


def _joined(w: Walk, cpu: list[Piece]) -> None:
    """Count the inline tensors as walked nodes and add their pieces to the walk's."""
    w.nodes += len(cpu)
    if cpu:
        have = w.pieces.get("cpu")
        if have is None:
            w.pieces["cpu"] = cpu
        else:
            have.extend(cpu)


def _emit(w: Walk, path: str, shape: Any, dtype: str, device: str, nbytes: int, span: int,
          ptr: int, t: Any, kind: str = "tensor") -> None:
    dims = w.dims.get(path) if w.dims else None
    w.add((path, kind, shape, dtype, device, nbytes, 1, dims))
    if ptr == 0 or device == "meta":  # meta, empty or storage-less tensors: no address
        ptr, device = _stand_in(t, device)
    w.piece(device, ptr, ptr + span, nbytes)
    w.storage(ptr, device, t)


def _stand_in(t: Any, device: str) -> tuple[int, str]:
    """An address for a tensor whose data_ptr is 0, and its address space.

    A meta tensor has a storage but no memory: its StorageImpl stands in (at the
    view's offset in it), so views of one meta storage overlap and count once,
    and two meta tensors never share an identity. A tensor with no storage to
    read (empty, storage-less subclasses) is its own object. Metadata only:
    nothing here runs on a device or synchronises one.
    """
    base = _T["base"]
    try:
        with _T["no_subclass"]():
            storage = base.untyped_storage(t)
            if storage.nbytes():
                start = base.storage_offset(t) * base.element_size(t)
                return (storage._cdata << 64) + start, device + "#storage"
    except Exception:
        pass
    return id(t) << 64, device + "#obj"


def _strided_bytes(shape: Any, stride: Any, logical: int) -> tuple[int, int]:
    """(referenced bytes, span in bytes) of a non-contiguous strided tensor."""
    numel = 1
    reach = 1
    for n, s in zip(shape, stride):
        numel *= n
        reach += (n - 1) * abs(s)
    if numel == 0:
        return 0, 0
    span = reach * (logical // numel)
    return min(logical, span), span


def _read(t: Any) -> tuple[Any, str, str, int, int, int]:
    """(shape, dtype, device, nbytes, span, ptr) of a dense tensor, without dispatch."""
    base = _T["base"]
    shape = _T["shape"].__get__(t)
    dtype = _dtype_name(_T["dtype"].__get__(t))
    device = "cpu" if _T["is_cpu"].__get__(t) else _device_name(_T["device"].__get__(t))
    nbytes = span = _T["nbytes"].__get__(t)
    if not base.is_contiguous(t):
        nbytes, span = _strided_bytes(shape, base.stride(t), nbytes)
    try:
        ptr = base.data_ptr(t)
    except Exception:
        ptr = 0
    return shape, dtype, device, nbytes, span, ptr


def _unusual(w: Walk, t: Any, path: str) -> None:
    with _T["no_subclass"]():
        layout = str(_T["layout"].__get__(t)).removeprefix("torch.")
        if layout in COMPONENTS:
            _sparse(w, t, path, layout)
        elif _T["is_nested"].__get__(t):
            _strided_nested(w, t, path)
        else:
            shape, dtype, device, nbytes, span, ptr = _read(t)
            _emit(w, path, shape, dtype, device, nbytes, span, ptr, t)


def _component(w: Walk, c: Any) -> tuple[int, str]:
    """Add one component tensor's piece; returns its (bytes, device)."""
    shape, dtype, device, nbytes, span, ptr = _read(c)
    space = device if ptr else device + "#obj"
    ptr = ptr or id(c) << 64
    w.piece(space, ptr, ptr + span, nbytes)
    return nbytes, device


def _sparse(w: Walk, t: Any, path: str, layout: str) -> None:
    base = _T["base"]
    parts = [getattr(base, name)(t) for name in COMPONENTS[layout]]
    sizes = [_component(w, c) for c in parts]
    shape = _T["shape"].__get__(t)
    dtype = _dtype_name(_T["dtype"].__get__(t))
    w.add((path, layout, shape, dtype, sizes[0][1], sum(s for s, _ in sizes), 1,
           w.dims.get(path) if w.dims else None))
    w.storage(_read(parts[0])[5], sizes[0][1], t)


def _strided_nested(w: Walk, t: Any, path: str) -> None:
    base = _T["base"]
    sizes = base._nested_tensor_size(t)
    meta = [sizes, base._nested_tensor_strides(t), base._nested_tensor_storage_offsets(t)]
    buffer = _T["nbytes"].__get__(t)
    ptr = base.data_ptr(t)
    device = "cpu" if _T["is_cpu"].__get__(t) else _device_name(_T["device"].__get__(t))
    w.piece(device, ptr, ptr + buffer, buffer)
    nbytes = buffer + sum(_component(w, m)[0] for m in meta)
    shape = (int(sizes.shape[0]), *_ranges(sizes))
    w.add((path, "nested", shape, _dtype_name(_T["dtype"].__get__(t)), device, nbytes, 1,
           w.dims.get(path) if w.dims else None))
    w.storage(ptr, device, t)


def _ranges(sizes: Any) -> list[Any]:
    """Per inner dim of a nested tensor, its size or its (min, max) over components."""
    if sizes.numel() == 0:
        return []
    lo, hi = sizes.amin(0).tolist(), sizes.amax(0).tolist()
    return [a if a == b else (a, b) for a, b in zip(lo, hi)]


def subclass_handler(w: Walk, t: Any, path: str, depth: int) -> None:
    """A tensor subclass: read through the base descriptors, torch-function dispatch off."""
    d = introspect.instance_dict(t)
    if d is not None and "_values" in d and "_offsets" in d:
        _jagged(w, t, d, path)
        return
    with _T["no_subclass"]():
        layout = str(_T["layout"].__get__(t)).removeprefix("torch.")
        if layout in COMPONENTS:
            _sparse(w, t, path, layout)
            return
        shape, dtype, device, nbytes, span, ptr = _read(t)
    _emit(w, path, shape, dtype, device, nbytes, span, ptr, t)


def _jagged(w: Walk, t: Any, d: dict[str, Any], path: str) -> None:
    """A jagged nested tensor (torch.nested, layout=torch.jagged): packed values plus offsets."""
    values, offsets, lengths = d["_values"], d["_offsets"], d.get("_lengths")
    with _T["no_subclass"]():
        nbytes, device = _component(w, values)
        nbytes += _component(w, offsets)[0]
        if lengths is not None:
            nbytes += _component(w, lengths)[0]
        rows = offsets.diff() if lengths is None else lengths
        vshape = _T["shape"].__get__(values)
        ragged = _ranges(rows.unsqueeze(1))
        shape = (int(offsets.shape[0]) - 1, *ragged, *vshape[1:])
        dtype = _dtype_name(_T["dtype"].__get__(values))
        ptr = _read(values)[5]
    w.add((path, "nested", shape, dtype, device, nbytes, 1, w.dims.get(path) if w.dims else None))
    w.storage(ptr, device, t)


def resolve(t: type, mro: tuple[type, ...]) -> Any:
    tensor = _T.get("Tensor")
    return subclass_handler if introspect.has_base(t, tensor) else None


register_resolver(resolve)
