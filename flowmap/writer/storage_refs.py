"""What a storage id is kept alive by: the storage object behind a tensor, or a view's owner.

An id is kept in the writer's table only while the object that first showed its
address lives (`flowmap.writer.storage_table.StorageTable.new_storage`), so a freed address
never links two tensors. These helpers find that object without calling the program's
code: torch's storage object (one Python object per live storage), a view's `_base`
read through the class's own getter, a numpy view's owning array.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Sequence
from typing import Any

from flowmap import trace_format as tf


def array_root(a: Any) -> Any:
    """The numpy array that owns the memory a view `a` looks into (`a` if none)."""
    np = sys.modules.get("numpy")
    if np is None:
        return a
    root = a
    for _ in range(32):  # a chain of views, bounded
        base = root.base
        if type(base) is not np.ndarray:
            break
        root = base
    return root


# torch's (Tensor, Parameter, torch-function mode check, storage getter), read once torch is
# imported: a hop of new storages reads them per storage.
_torch_refs: list[Any] = []


def _bound_torch() -> list[Any]:
    """torch's (Tensor, Parameter, mode check, storage getter); empty before torch is imported."""
    refs = _torch_refs
    if not refs:
        torch = sys.modules.get("torch")
        if torch is None:
            return refs
        try:
            refs.extend((torch.Tensor, torch.nn.Parameter, torch._C._is_torch_function_mode_enabled,
                         torch._C.TensorBase.untyped_storage))
        except Exception:  # torch half imported: next time
            del refs[:]
    return refs


def storage_of(holder: Any) -> Any:
    """A plain tensor's storage object, or None. torch keeps one Python object per live
    storage (it is preserved while any tensor holds the storage), so a weak reference to it
    dies exactly when the storage is freed. Only for `Tensor` and `Parameter` themselves,
    with no torch-function mode on: a subclass's or a mode's hook would see the call, and
    flowmap never calls the program's hooks."""
    refs = _torch_refs or _bound_torch()
    if not refs:
        return None
    t = type(holder)
    if t is not refs[0] and t is not refs[1]:
        return None
    try:
        return None if refs[2]() else refs[3](holder)
    except Exception:  # sparse and other layouts without one storage
        return None


def same_memory(named: Any, storage: Any, start: int) -> bool:
    """Whether `named` (what holds a storage named at `start`, alive) holds the memory of
    `storage` too, the other library's object over it: a torch storage `from_numpy` made
    over an array, an array `Tensor.numpy()` made over a tensor's storage. Two live
    allocations never share an address, so a live holder whose data starts at `start` is
    the same memory. Only a torch storage's and an exact array's start are read."""
    if named is None:
        return False
    if named is storage:
        return True
    np = sys.modules.get("numpy")
    refs = _torch_refs or _bound_torch()
    try:
        if np is not None and type(named) is np.ndarray:
            return bool(named.__array_interface__["data"][0] == start)
        untyped = sys.modules["torch"].UntypedStorage if refs else None
        return untyped is not None and type(named) is untyped and named.data_ptr() == start
    except Exception:
        return False


def versions_of(holders: Sequence[Any]) -> list[int | None]:
    """Each plain tensor's version counter (torch bumps it at every in-place write to its
    storage, through any view), None for another holder; empty when none can be read (torch
    not imported, a torch-function mode on: its hook would see the read)."""
    refs = _torch_refs or _bound_torch()
    if not refs or refs[2]():
        return []
    tensor, parameter = refs[0], refs[1]
    try:
        return [h._version if type(h) is tensor or type(h) is parameter else None for h in holders]
    except RuntimeError:  # an inference tensor (`torch.inference_mode`) has no counter
        return [_version(h) if type(h) is tensor or type(h) is parameter else None
                for h in holders]


CONTENT_WINDOW = 16  # bytes of an array read at each of four places (`contents`)


def contents(holders: Sequence[Any], keys: Sequence[Any], seen: dict[Any, list[Any]]
                  ) -> list[Any]:
    """`versions_of(holders)`, where a numpy array (no version counter) stands for its
    content: a hop whose transport serialises it (a queue, a pipe, a ZMQ socket pickles
    its bytes) may read four 16-byte windows of what it serialised. A buffer refilled in
    place between two messages holds new data, as a torch tensor's moved counter says;
    one sent again unchanged is the same. A fingerprint is `("content", crc)`, never equal
    to a counter: memory a tensor's counter followed (`torch.from_numpy`) keeps it."""
    versions: list[Any] = versions_of(holders) or [None] * len(holders)
    np = sys.modules.get("numpy")
    if np is None:
        return versions
    for i, h in enumerate(holders):
        if versions[i] is None and type(h) is np.ndarray:
            last = seen.get(keys[i])
            if last is None or type(last[0]) is tuple:
                versions[i] = _content(h)
    return versions


def windows_of(holder: Any, tensors: bool) -> list[int] | None:
    """The CRC-32 of the 16 bytes at each of `trace_format.WINDOW_OFFSETS` that fits in a
    host array's data, read where its transport serialises it (a numpy array always; a
    contiguous CPU tensor where `tensors`: pickled, not moved to shared memory); None for
    anything else (a device tensor is never read: that would synchronise the program)."""
    try:
        np = sys.modules.get("numpy")
        if np is not None and type(holder) is np.ndarray:
            a = holder
        else:
            refs = _torch_refs or _bound_torch()
            if (not tensors or not refs or refs[2]() or type(holder) is not refs[0]
                    or not holder.is_cpu or not holder.is_contiguous()):
                return None
            a = holder.detach().numpy()  # the same memory (no copy, no dispatch)
        if not a.flags.c_contiguous or a.dtype.hasobject:
            return None
        m = memoryview(a).cast("B")
        n, w = m.nbytes, tf.WINDOW_BYTES
        return [zlib.crc32(m[at:at + w]) for at in tf.WINDOW_OFFSETS if at + w <= n]
    except (TypeError, ValueError, RuntimeError):
        return None


def _content(a: Any) -> tuple[str, int] | None:
    try:
        n = a.nbytes
        if n < 4 * CONTENT_WINDOW or not a.flags.c_contiguous or a.dtype.hasobject:
            return None
        m = memoryview(a).cast("B")
        w = CONTENT_WINDOW
        crc = 0
        for at in (0, n // 3, 2 * n // 3, n - w):
            crc = zlib.crc32(m[at:at + w], crc)
        return ("content", crc)
    except (TypeError, ValueError):
        return None


def _version(t: Any) -> int | None:
    try:
        return t._version  # type: ignore[no-any-return]
    except RuntimeError:
        return None


# id(type) -> (type, its `_base` getter or None): looked up once per type, not per storage (a
# missing class attribute costs an exception inside getattr). Keyed by id, as the describers'
# plans are: a dict keyed by the type would call a metaclass's `__hash__`.
_BASES: dict[int, tuple[type, Any]] = {}
MAX_BASES = 1024


def base_getter(t: type) -> Any:
    entry = _BASES.get(id(t))
    if entry is not None and entry[0] is t:
        return entry[1]
    getter = getattr(t, "_base", None)
    if len(_BASES) >= MAX_BASES:  # classes made on the fly: bounded
        _BASES.clear()
    _BASES[id(t)] = (t, getter)
    return getter


def start_span(view: Any, storage: Any) -> int | None:
    """The bytes into its storage that a view starting at the storage's start reaches (its
    last element's end), when short of the storage's end; None otherwise. Read only on a
    plain tensor `storage_of` accepted, or a numpy array (`storage` its owning array), so
    no hook of the program's sees the reads."""
    try:
        if type(view).__name__ == "ndarray":
            whole = storage.nbytes
            if view.nbytes >= whole:
                return None  # the whole array: the common case, two reads
            shape, strides, item = view.shape, view.strides, view.itemsize
        else:
            whole = storage.nbytes()
            if view.nbytes >= whole or view.storage_offset():
                return None
            item = view.element_size()
            shape, strides = view.size(), [n * item for n in view.stride()]
        reach = item
        for n, stride in zip(shape, strides):
            if n == 0:
                return 0
            if stride < 0:
                return None  # its start is not its lowest address
            reach += (n - 1) * stride
        return reach if reach < whole else None
    except Exception:
        return None
