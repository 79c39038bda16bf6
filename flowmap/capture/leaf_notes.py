"""What a payload's schema cannot say about its tensors, for hops that move bytes.

Two facts, each behind a finding (docs/findings.md):

- **storage bytes**: a view (`big[:1]`) pickled or put in shared memory carries
  its whole storage, not its own bytes (pytorch/pytorch #182105). The schema
  records the view's bytes; the note records `untyped_storage().nbytes()`, a
  metadata read, when it is larger.
- **real elements of a mask**: how many positions of a padded batch are real:
  those before each row's run of trailing zeros (a mask that zeroes the prompt
  tokens of a packed batch, `[1, N]`, has zeros inside its rows, not padding).
  Counted only for a CPU mask of at most `MAX_MASK_ELEMENTS`:
  a read of a small host array, never of a device one (that would synchronise
  the program with its accelerator) and never a copy.

Only hops whose transport moves bytes (not `ref`) are noted, so the cost stays
off in-process hops. The walk is bounded (`MAX_DEPTH`, `MAX_TENSORS`, the first
`MAX_TENSORS` entries of a container), goes through exact dicts, lists and tuples
(named tuples by field) and the `__dict__` of plain objects only, and never calls
the user's code; paths are the describers' (`batch.attention_mask`, `[*].row` in a
list, `[1]` in a short tuple): a view sent as `(step, t[:1])` or in a list of
samples moves its storage as surely as one in a dict. A tensor that is neither a
view (`_base is None`) nor a mask costs one attribute read.
"""

from __future__ import annotations

import sys
from typing import Any

from flowmap.capture.describers import introspect
from flowmap.capture.describers.columns import MAX_INDEXED_TUPLE

MAX_DEPTH = 3
MAX_TENSORS = 64
MAX_MASK_ELEMENTS = 1 << 22
MASK_DTYPES = ("torch.bool", "torch.uint8", "torch.int8", "torch.int32", "torch.int64",
               "torch.float32", "torch.bfloat16", "torch.float16")

# One note: [path, the leaf's bytes, storage bytes behind it or None, real elements or None]
Note = list[Any]


def collect(payload: Any, transport: str = "pickle") -> list[Note]:
    """Notes for the tensors of `payload` that have something to say; [] for most payloads.

    Under `shm`, a storage already in shared memory (`is_shared()`: moved by an earlier
    message, or a pool the program made) crosses as a handle, and so does a device
    tensor's: only a host storage not yet shared moves, so notes must be taken before
    the message is pickled (pickling shares it).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    out: list[Note] = []
    seen = _Seen()
    if torch._C._is_torch_function_mode_enabled():  # a mode would see every read: off meanwhile
        with torch._C.DisableTorchFunction():
            _walk(torch, payload, "", 0, out, seen, transport == "shm")
    else:
        _walk(torch, payload, "", 0, out, seen, transport == "shm")
    return out


def _walk(torch: Any, obj: Any, path: str, depth: int, out: list[Note], seen: _Seen,
          shm: bool) -> None:
    if seen.tensors >= MAX_TENSORS:
        return
    t = type(obj)
    if t is torch.Tensor or t is torch.nn.Parameter:
        seen.tensors += 1
        note = _note(torch, obj, path, shm, seen.storages)
        if note is not None:
            out.append(note)
        return
    if depth >= MAX_DEPTH:
        return
    if t is list or t is tuple:
        _walk_items(torch, obj, path, depth, out, seen, shm)
        return
    if t is dict:
        d: dict[Any, Any] | None = obj
    elif t in (int, float, str, bytes, bool) or obj is None:
        return
    elif isinstance(obj, tuple):
        fields = getattr(t, "_fields", None)  # a named tuple: walked by field, as described
        if type(fields) is tuple and all(type(f) is str for f in fields):
            d = dict(zip(fields, tuple.__iter__(obj)))
        else:
            return
    else:
        d = introspect.instance_dict(obj)
    if d is None:
        return
    for k, v in list(dict.items(d))[:MAX_TENSORS]:
        if type(k) is str:
            _walk(torch, v, f"{path}.{k}" if path else k, depth + 1, out, seen, shm)


def _walk_items(torch: Any, seq: list[Any] | tuple[Any, ...], path: str, depth: int,
                out: list[Note], seen: _Seen, shm: bool) -> None:
    """A list's items under `path[*]` (the describers fold lists), a short tuple's under
    `path[i]`; only the first `MAX_TENSORS` items, whose kinds the folded path shares."""
    folded = type(seq) is list or len(seq) > MAX_INDEXED_TUPLE
    for i, v in enumerate(seq[:MAX_TENSORS]):
        if seen.tensors >= MAX_TENSORS:
            return
        _walk(torch, v, f"{path}[*]" if folded else f"{path}[{i}]", depth + 1, out, seen, shm)


class _Seen:
    """What one message's walk met so far: its tensors, and the storages behind its views
    (a message carries a storage once, however many of its views it holds: pickle writes
    it once, shared memory moves it once)."""

    __slots__ = ("tensors", "storages")

    def __init__(self) -> None:
        self.tensors = 0
        self.storages: set[int] = set()


def _note(torch: Any, t: Any, path: str, shm: bool, storages: set[int]) -> Note | None:
    try:
        masked = "mask" in path.rsplit(".", 1)[-1].lower()
        if t._base is None and not masked:  # not a view, nor a mask: nothing to note
            return None
        nbytes = int(t.nbytes)
        held = t.untyped_storage()
        storage = int(held.nbytes())
        # the storage's own `is_shared` (C): `Tensor.is_shared` asks it too, through a
        # TypedStorage it builds first (~1 µs a tensor, most of a note on a shared slot)
        if shm and storage > nbytes and (not t.is_cpu or held.is_shared()):
            storage = 0  # a handle crosses: the storage is where the receiver maps it
        if storage > nbytes:
            where = held.data_ptr()
            if where in storages:
                storage = 0  # another view of a storage this message already carries
            storages.add(where)
        real = None
        if (masked and t.dim() >= 2 and t.is_cpu and t.numel() <= MAX_MASK_ELEMENTS
                and str(t.dtype) in MASK_DTYPES):
            real = _before_tails(torch, t)
        if storage <= nbytes and real is None:
            return None
        return [path, nbytes, storage if storage > nbytes else None, real]
    except Exception:  # storage-less, sparse, nested: nothing to note
        return None


def _before_tails(torch: Any, t: Any) -> int:
    """Elements of `t` before each row's trailing zeros along dim 1 (what padding is not).

    A mask with no zero (or only zeros) costs its `count_nonzero`; else its rows are read
    as a numpy view of the same memory (a few small array operations, no torch dispatch)."""
    nonzero = int(torch.count_nonzero(t))
    rows, positions = t.shape[0], t.shape[1]
    numel = t.numel()
    np = sys.modules.get("numpy")
    if nonzero in (0, numel) or not rows or not positions or np is None:
        return nonzero
    held = t.detach()
    if held.dtype == torch.bfloat16:  # numpy has no bfloat16
        held = held.ne(0)
    a = held.numpy().reshape(rows, positions, -1)
    filled = (a != 0).any(axis=2) if a.shape[2] > 1 else a[:, :, 0] != 0
    # each row's last filled position, counted from 1: the largest (j + 1) where it is filled
    last = (filled * np.arange(1, positions + 1, dtype=np.int32)).max(axis=1)
    return int(last.sum()) * int(numel // (rows * positions))
