"""What a payload's schema cannot say about its tensors, for hops that move bytes.

Two facts, each behind a finding (docs/findings.md):

- **storage bytes**: a view (`big[:1]`) pickled or put in shared memory carries
  its whole storage, not its own bytes (pytorch/pytorch #182105). The schema
  records the view's bytes; the note records `untyped_storage().nbytes()`, a
  metadata read, when it is larger.
- **real elements of a mask**: how many positions of a padded batch are real:
  those before each row's run of trailing zeros (a mask that zeroes the prompt
  tokens of a packed batch, `[1, N]`, has zeros inside its rows, not padding),
  or after its leading zeros when every row of a batch ends filled (left
  padding). A mask is a leaf named `*mask*`, or a host array of 0s and 1s
  (bool, integer or float, two dims or more) beside another array of the same two
  leading dims (`(input_ids, attention)`, `{"ids", "valid"}`), whose rows (two
  or more) each hold one run of ones: a row of a candidate is read first, so
  token ids cost the read of a few positions. Counted only for a
  CPU mask of at most `MAX_MASK_ELEMENTS`: a read of a small host array, never
  of a device one (that would synchronise the program with its accelerator)
  and never a copy.

Only hops whose transport moves bytes (not `ref`) are noted, so the cost stays
off in-process hops. The walk is bounded (`MAX_DEPTH`, `MAX_TENSORS`), goes
through exact dicts, short exact tuples and the `__dict__` of plain objects
only, and never calls the user's code; paths are the describers'
(`batch.attention_mask`, `[1]`). A tensor that is neither a view (`_base is
None`) nor a mask costs one attribute read.
"""

from __future__ import annotations

import sys
from typing import Any

from flowmap.capture.describers import introspect
from flowmap.capture.describers.columns import MAX_INDEXED_TUPLE

MAX_DEPTH = 3
MAX_TENSORS = 64
MAX_MASK_ELEMENTS = 1 << 22
PROBE = 64  # positions of a candidate's first row read first: token ids fail there
MIN_MASK_FILL = 0.05  # of an unnamed 0/1 array's positions: sparser is a signal, not a mask
MASK_DTYPES = ("torch.bool", "torch.uint8", "torch.int8", "torch.int32", "torch.int64",
               "torch.float32", "torch.bfloat16", "torch.float16")

# One note: [path, the leaf's bytes, storage bytes behind it or None, real elements or None]
Note = list[Any]


def collect(payload: Any, transport: str = "pickle") -> list[Note]:
    """Notes for the arrays of `payload` that have something to say; [] for most payloads.

    Under `shm`, a storage already in shared memory (`is_shared()`: moved by an earlier
    message, or a pool the program made) crosses as a handle, and so does a device
    tensor's: only a host storage not yet shared moves, so notes must be taken before
    the message is pickled (pickling shares it).
    """
    torch = sys.modules.get("torch")
    np = sys.modules.get("numpy")
    if torch is None and np is None:
        return []
    found: list[tuple[str, Any]] = []
    if torch is not None and torch._C._is_torch_function_mode_enabled():
        with torch._C.DisableTorchFunction():  # a mode would see every read: off meanwhile
            _walk(torch, np, payload, "", 0, found)
            return _notes(torch, np, found, transport == "shm")
    _walk(torch, np, payload, "", 0, found)
    return _notes(torch, np, found, transport == "shm")


def _walk(torch: Any, np: Any, obj: Any, path: str, depth: int,
          found: list[tuple[str, Any]]) -> None:
    if len(found) >= MAX_TENSORS:
        return
    t = type(obj)
    if (torch is not None and (t is torch.Tensor or t is torch.nn.Parameter)) or \
            (np is not None and t is np.ndarray):
        found.append((path, obj))
        return
    if depth >= MAX_DEPTH:
        return
    if t is tuple:
        if len(obj) <= MAX_INDEXED_TUPLE:
            for i, v in enumerate(obj):
                _walk(torch, np, v, f"{path}[{i}]", depth + 1, found)
        return
    if t is dict:
        d: dict[Any, Any] | None = obj
    elif t in (list, int, float, str, bytes, bool) or obj is None:
        return
    else:
        d = introspect.instance_dict(obj)
    if d is None:
        return
    for k, v in list(dict.items(d))[:MAX_TENSORS]:
        if type(k) is str:
            _walk(torch, np, v, f"{path}.{k}" if path else k, depth + 1, found)


def _notes(torch: Any, np: Any, found: list[tuple[str, Any]], shm: bool) -> list[Note]:
    out: list[Note] = []
    # the two leading dims of the payload's arrays: a mask rides beside what it masks
    lead: dict[tuple[int, int], int] = {}
    for _, a in found:
        if len(a.shape) >= 2:
            key = (int(a.shape[0]), int(a.shape[1]))
            lead[key] = lead.get(key, 0) + 1
    for path, a in found:
        try:
            if np is not None and type(a) is np.ndarray:
                note = _array_note(np, a, path, lead)
            else:
                note = _note(torch, a, path, shm, lead)
        except Exception:  # storage-less, sparse, nested: nothing to note
            note = None
        if note is not None:
            out.append(note)
    return out


def _array_note(np: Any, a: Any, path: str, lead: dict[tuple[int, int], int]) -> Note | None:
    """A numpy mask's real positions (numpy pickles only a view's own elements)."""
    if a.ndim < 2 or a.size > MAX_MASK_ELEMENTS or a.dtype.kind not in "biuf":
        return None
    named = "mask" in path.rsplit(".", 1)[-1].lower()
    if not named and not (lead.get((a.shape[0], a.shape[1]), 0) >= 2 and _zero_one(a)
                          and _padding_like(_rows(a != 0))):
        return None
    return [path, int(a.nbytes), None, real_positions(np, a != 0)]


def _rows(filled: Any) -> Any:
    """`[rows, positions, ...]` bool -> `[rows, positions]`: a position holds something."""
    return filled.reshape(filled.shape[0], filled.shape[1], -1).any(axis=2)


def _filled(torch: Any, t: Any) -> Any:
    held = t.detach()
    return _rows(held.ne(0).numpy())


def _padding_like(filled: Any) -> bool:
    """Whether an unnamed 0/1 array marks padding: at least two rows, each row's ones one
    run (left or right padding), and at least `MIN_MASK_FILL` of it ones. A reward placed at
    each row's last token, or a packed row's loss weight over its responses, is not."""
    if filled.shape[0] < 2 or not filled.shape[1]:
        return False
    count = filled.sum(axis=1)
    if count.sum() < MIN_MASK_FILL * filled.size:
        return False
    first = filled.argmax(axis=1)
    last = filled.shape[1] - filled[:, ::-1].argmax(axis=1)
    return bool(((count == 0) | (count == last - first)).all())


def _zero_one(a: Any) -> bool:
    """Whether a host array holds only 0s and 1s: its first row first (ids fail there)."""
    if a.dtype.kind == "b":
        return True
    for part in (a[0, :PROBE], a):
        if part.size and (part.min() < 0 or part.max() > 1):
            return False
        if a.dtype.kind == "f" and not bool(((part == 0) | (part == 1)).all()):
            return False  # probabilities, not a mask
    return True


def _note(torch: Any, t: Any, path: str, shm: bool, lead: dict[tuple[int, int], int]) -> Note | None:
    masked = "mask" in path.rsplit(".", 1)[-1].lower()
    # an unnamed mask: 0s and 1s in one run a row, beside arrays of its leading dims
    found = (not masked and _mask_candidate(torch, t, lead) and _tensor_zero_one(torch, t)
             and _padding_like(_filled(torch, t)))
    if t._base is None and not masked and not found:
        return None  # not a view, nor a mask: nothing to note
    nbytes = int(t.nbytes)
    held = t.untyped_storage()
    storage = int(held.nbytes())
    # the storage's own `is_shared` (C): `Tensor.is_shared` asks it too, through a
    # TypedStorage it builds first (~1 µs a tensor, most of a note on a shared slot)
    if shm and storage > nbytes and (not t.is_cpu or held.is_shared()):
        storage = 0  # a handle crosses: the storage is where the receiver maps it
    real = None
    if found or (masked and t.dim() >= 2 and t.is_cpu and t.numel() <= MAX_MASK_ELEMENTS
                 and str(t.dtype) in MASK_DTYPES):
        real = _before_tails(torch, t)
    if storage <= nbytes and real is None:
        return None
    return [path, nbytes, storage if storage > nbytes else None, real]


def _mask_candidate(torch: Any, t: Any, lead: dict[tuple[int, int], int]) -> bool:
    """An unnamed host array that could be a mask: bool, integer or float, two dims or more,
    beside another array of its two leading dims."""
    shape = t.shape
    return (len(shape) >= 2 and lead.get((shape[0], shape[1]), 0) >= 2
            and t.dtype in _mask_dtypes(torch) and t.is_cpu and t.numel() <= MAX_MASK_ELEMENTS)


_DTYPES: list[Any] = []


def _mask_dtypes(torch: Any) -> Any:
    if not _DTYPES:
        _DTYPES.append(frozenset(getattr(torch, d.split(".", 1)[1]) for d in MASK_DTYPES))
    return _DTYPES[0]


def _tensor_zero_one(torch: Any, t: Any) -> bool:
    """Whether a tensor holds only 0s and 1s: its first row first (ids fail there)."""
    if t.dtype == torch.bool:
        return True
    for part in (t[0, :PROBE], t):
        if part.numel():
            lo, hi = torch.aminmax(part)
            if float(lo) < 0 or float(hi) > 1:
                return False
            if t.is_floating_point() and not bool(((part == 0) | (part == 1)).all()):
                return False  # probabilities, not a mask
    return True


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
    return real_positions(np, (a != 0).any(axis=2) if a.shape[2] > 1 else a[:, :, 0] != 0) * \
        int(numel // (rows * positions))


def real_positions(np: Any, filled: Any) -> int:
    """Positions of `filled` (`[rows, positions, ...]`, bool) that are not padding.

    Padding is each row's run of trailing zeros; but when a batch's rows all end filled,
    its text is right-aligned (left padding) and the leading zeros are. A packed row
    (`[1, N]`) starts with its first sample's prompt, which is no padding."""
    if filled.ndim > 2:
        per = int(filled[0, 0].size)
        filled = filled.reshape(filled.shape[0], filled.shape[1], -1).any(axis=2)
    else:
        per = 1
    rows, positions = filled.shape[0], filled.shape[1]
    if not rows or not positions:
        return 0
    any_ = filled.any(axis=1)
    if rows >= 2 and bool(filled[:, -1].all()):
        first = filled.argmax(axis=1)  # each row's first filled position
        return int(np.where(any_, positions - first, 0).sum()) * per
    # each row's last filled position, counted from 1
    last = np.where(any_, positions - filled[:, ::-1].argmax(axis=1), 0)
    return int(last.sum()) * per
