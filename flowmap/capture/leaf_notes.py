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
  padding; not for a mask named for a loss, whose leading zeros are a prompt).
  A mask is a leaf named `*mask*`, or an array nobody named beside
  another of the same two leading dims, one of them integers (`(input_ids,
  valid)`), whose rows (two or more) each hold one run of ones: a bool one,
  and, under `flowmap trace --values` only (which reads data), an integer or
  float one, whose first row's ends are read first (16 values each: token ids
  fail there). Counted only for a CPU mask of at most `MAX_MASK_ELEMENTS`: a
  read of a small host array, never of a device one (that would synchronise
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
PROBE = 16  # positions of a candidate's first row read first: token ids fail there
MAX_CANDIDATES = 4  # arrays of one pair of leading dims read as a mask nobody named
MIN_MASK_FILL = 0.05  # of an unnamed 0/1 array's positions: sparser is a signal, not a mask
MASK_DTYPES = ("torch.bool", "torch.uint8", "torch.int8", "torch.int32", "torch.int64",
               "torch.float32", "torch.bfloat16", "torch.float16")

# One note: [path, the leaf's bytes, storage bytes behind it or None, real elements or None]
Note = list[Any]


def collect(payload: Any, transport: str = "pickle", unnamed: bool = False) -> list[Note]:
    """Notes for the arrays of `payload` that have something to say; [] for most payloads.
    `unnamed`: look for masks nobody named too (`trace --values`: it reads arrays' values).

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
            return _notes(torch, np, found, transport == "shm", unnamed)
    _walk(torch, np, payload, "", 0, found)
    return _notes(torch, np, found, transport == "shm", unnamed)


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
    if t is list or t is tuple:
        # a list's items under `path[*]` (the describers fold lists), a short tuple's under
        # `path[i]`; the first `MAX_TENSORS` items, whose kinds the folded path shares
        folded = t is list or len(obj) > MAX_INDEXED_TUPLE
        for i, v in enumerate(obj[:MAX_TENSORS]):
            _walk(torch, np, v, f"{path}[*]" if folded else f"{path}[{i}]", depth + 1, found)
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
            _walk(torch, np, v, f"{path}.{k}" if path else k, depth + 1, found)


def _notes(torch: Any, np: Any, found: list[tuple[str, Any]], shm: bool,
           unnamed: bool) -> list[Note]:
    # the two leading dims of the payload's arrays: a mask rides beside what it masks; where
    # a leaf named `*mask*` has them, that is the mask and no other array is read
    lead: dict[Any, list[int]] = {}
    named: set[Any] = set()
    for i, (path, a) in enumerate(found):
        shape = a.shape
        if len(shape) >= 2:
            key = (shape[0], shape[1])
            lead.setdefault(key, []).append(i)
            if _named(path):
                named.add(key)
    candidates: set[int] = set()
    for key, members in lead.items():
        if len(members) < 2 or key in named:
            continue
        ranks = sorted((_rank(torch, found[i][1]), i) for i in members)
        if any(r == 1 for r, _ in ranks):  # an integer array (tokens) a mask could mask
            # at most MAX_CANDIDATES read: bool ones first, then integers, floats last; an
            # integer or float array is probed only under `--values` (it may be no mask)
            candidates.update(i for r, i in ranks[:MAX_CANDIDATES] if unnamed or r == 0)
    out: list[Note] = []
    # shared memory moves a storage once, however many of its views a message holds; pickle
    # writes it once a view (torch reduces each tensor to its whole storage, unshared)
    storages: set[int] = set()
    for i, (path, a) in enumerate(found):
        try:
            if np is not None and type(a) is np.ndarray:
                note = _array_note(np, a, path, i in candidates)
            else:
                note = _note(torch, np, a, path, shm, i in candidates, storages)
        except Exception:  # storage-less, sparse, nested: nothing to note
            note = None
        if note is not None:
            out.append(note)
    return out


def _rank(torch: Any, a: Any) -> int:
    """Bool arrays first, then integers, then the rest (dtype attributes: no string built)."""
    dt = a.dtype
    if torch is None or type(dt) is not type(torch.bool):  # numpy
        kind = dt.kind
        return 0 if kind == "b" else 1 if kind in "iu" else 2
    return 0 if dt is torch.bool else 2 if dt.is_floating_point or dt.is_complex else 1


def _named(path: str) -> bool:
    return "mask" in path.rsplit(".", 1)[-1].lower()


# Masks of the tokens a loss is taken over: their leading zeros are a prompt's tokens
LOSS_MASKS = ("loss", "response", "action", "label", "advantage", "completion")


def _attention(path: str) -> bool | None:
    """Which of a named mask's zeros are padding, by its name (`real_positions`' `both_ends`).
    An attention mask (`attention_mask`, `attn_mask`): its zeros are positions no token
    is at, so a row's leading zeros are padding as surely as its trailing ones (verl's
    left-padded prompt beside a right-padded response): True. A loss mask (`loss_mask`,
    `response_mask`, `action_mask`): its leading zeros are a prompt's tokens, in rows that
    all end filled too (prompt and response fill each row): False, its trailing zeros only.
    Any other: None, as `real_positions` reads a mask of no such name."""
    last = path.rsplit(".", 1)[-1].lower()
    if "attention" in last or "attn" in last:
        return True
    return False if any(word in last for word in LOSS_MASKS) else None


def _array_note(np: Any, a: Any, path: str, candidate: bool) -> Note | None:
    """A numpy mask's real positions (numpy pickles only a view's own elements)."""
    if a.ndim < 2 or a.size > MAX_MASK_ELEMENTS or a.dtype.kind not in "biuf":
        return None
    if _named(path):
        return [path, int(a.nbytes), None, real_positions(np, a != 0, _attention(path))]
    if not candidate or not _probe(a):
        return None
    filled = _unnamed_mask(np, a)
    return None if filled is None else [path, int(a.nbytes), None, real_positions(np, filled)]


def _probe(a: Any) -> bool:
    """Whether the first and last `PROBE` positions of a candidate's first row are 0s and
    1s, a 1 among them (a mask's row starts or ends filled): token ids, log-probs, positions
    and zeroed buffers fail here, at the cost of reading a few values."""
    rest = (0,) * (len(a.shape) - 2)
    seen = set(a[(0, slice(0, PROBE)) + rest].tolist())
    seen.update(a[(0, slice(-PROBE, None)) + rest].tolist())
    return 1 in seen and seen <= {0, 1}


def _unnamed_mask(np: Any, a: Any) -> Any:
    """`a != 0` when host array `a` (numpy) is a padding mask nobody named, else None: 0s
    and 1s only, at least two rows, each row's ones one run (left or right padding), and at
    least `MIN_MASK_FILL` of it ones. A reward placed at each row's last token, or a packed
    row's loss weight over its responses, is not."""
    filled = a != 0
    if not filled.any():
        return None  # zeros (a buffer not yet written) say nothing
    if a.dtype.kind != "b":
        if a.min() < 0 or a.max() > 1:
            return None
        if a.dtype.kind == "f" and not bool((filled == (a == 1)).all()):
            return None  # values strictly between 0 and 1: probabilities, not a mask
    rows = filled.reshape(filled.shape[0], filled.shape[1], -1).any(axis=2)
    if rows.shape[0] < 2 or not rows.shape[1]:
        return None
    count = rows.sum(axis=1)
    if count.sum() < MIN_MASK_FILL * rows.size:
        return None
    first = rows.argmax(axis=1)
    last = rows.shape[1] - rows[:, ::-1].argmax(axis=1)
    return filled if bool(((count == 0) | (count == last - first)).all()) else None


def _note(torch: Any, np: Any, t: Any, path: str, shm: bool, candidate: bool,
          storages: set[int]) -> Note | None:
    masked = _named(path)
    # an unnamed mask: 0s and 1s in one run a row, beside arrays of its leading dims
    filled = None
    if (candidate and np is not None and t.dtype in _mask_dtypes(torch)
            and t.is_cpu and t.numel() <= MAX_MASK_ELEMENTS):
        a = t.detach().numpy()  # the same memory, read through numpy: no torch dispatch
        filled = _unnamed_mask(np, a) if _probe(a) else None
    if t._base is None and not masked and filled is None:
        return None  # not a view, nor a mask: nothing to note
    nbytes = int(t.nbytes)
    held = t.untyped_storage()
    storage = int(held.nbytes())
    # the storage's own `is_shared` (C): `Tensor.is_shared` asks it too, through a
    # TypedStorage it builds first (~1 µs a tensor, most of a note on a shared slot)
    if shm and storage > nbytes and (not t.is_cpu or held.is_shared()):
        storage = 0  # a handle crosses: the storage is where the receiver maps it
    if storage > nbytes:
        where = held.data_ptr()
        if shm and where in storages:
            storage = 0  # another view of a storage this message already moved
        storages.add(where)
    real = None
    if filled is not None:
        real = real_positions(np, filled)
    elif (masked and t.dim() >= 2 and t.is_cpu and t.numel() <= MAX_MASK_ELEMENTS
          and str(t.dtype) in MASK_DTYPES):
        real = _before_tails(torch, t, _attention(path))
    if storage <= nbytes and real is None:
        return None
    return [path, nbytes, storage if storage > nbytes else None, real]


_DTYPES: list[Any] = []


def _mask_dtypes(torch: Any) -> Any:
    """The dtypes of a mask nobody named (numpy reads them: no bfloat16 or float16)."""
    if not _DTYPES:
        _DTYPES.append(frozenset((torch.bool, torch.uint8, torch.int8, torch.int32,
                                  torch.int64, torch.float32)))
    return _DTYPES[0]


def _before_tails(torch: Any, t: Any, both_ends: bool | None = None) -> int:
    """Elements of `t` before each row's trailing zeros along dim 1 (what padding is not;
    `both_ends`: and after its leading zeros).

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
    return real_positions(np, filled, both_ends) * int(numel // (rows * positions))


def real_positions(np: Any, filled: Any, both_ends: bool | None = None) -> int:
    """Positions of `filled` (`[rows, positions, ...]`, bool) that are not padding.

    Padding is each row's run of trailing zeros; but when a batch's rows all end filled,
    its text is right-aligned (left padding) and the leading zeros are. A packed row
    (`[1, N]`) starts with its first sample's prompt, which is no padding. `both_ends`
    True (an attention mask of two or more rows): leading and trailing zeros both are;
    False (a loss mask): trailing zeros only, its leading ones a prompt."""
    if filled.ndim > 2:
        per = int(filled[0, 0].size)
        filled = filled.reshape(filled.shape[0], filled.shape[1], -1).any(axis=2)
    else:
        per = 1
    rows, positions = filled.shape[0], filled.shape[1]
    if not rows or not positions:
        return 0
    first = filled.argmax(axis=1)  # each row's first filled position (0 for an empty row)
    if rows >= 2 and both_ends is not False and bool(filled[:, -1].all()):
        return int((positions - first).sum()) * per
    # each row's last filled position, counted from 1 (0 for an empty row)
    last = (filled * np.arange(1, positions + 1, dtype=np.int32)).max(axis=1)
    if rows >= 2 and both_ends:
        return int(np.where(last > 0, last - first, 0).sum()) * per
    return int(last.sum()) * per
