"""Replay of rollout selections, and the shared-memory store that keeps them off the control path.

R3 (rollout routing replay) records which MoE experts each token was routed to
during rollout and makes training route the same way; the DSA analogue records
which past positions the lightning indexer kept for each query. Training then
computes gates and attention under its own weights but over rollout's choices,
so train/inference numeric drift cannot flip a selection.

Row convention, per sequence: row p holds the selections made by the forward
pass of position p, for p = 0 .. len(prompt + output) - 2. Those are exactly
the positions rollout ran through the model; the last sampled token never was
(nothing was sampled after it). Arrays are int32:

    routed_experts  (tokens, layers, moe_top_k)       expert ids, ascending
    indexer_topk    (tokens, layers, dsa_index_topk)  key positions, ascending, -1 padded
                                                      (position p has only p + 1 keys)

In a training batch the leading `tokens` dim becomes `(batch, columns)`, aligned
with `input_ids`; a row that is all -1 was not recorded (padding, the last
token) and training computes its own selection there.

The store: one POSIX shared-memory segment per entry (one trajectory's arrays),
created by the process that runs the engine. Only a `ReplayHandle` (names,
dtypes, shapes: a few hundred bytes) travels; a reader in another process opens
the segment by name and copies only the rows it asked for. The owner frees an
entry once it is consumed or dropped, which unlinks the segment at once.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import secrets
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path

import torch
from torch import Tensor

import flowmap

ALIGN_BYTES = 64  # every array starts on a cache line, which also keeps dtype views legal
SHM_DIR = Path("/dev/shm")  # where Linux keeps POSIX shared memory, one file per segment

# Dimension names of the replay arrays, for `flowmap.hop(..., dims=...)` (projection presets).
REPLAY_DIMS: dict[str, tuple[str, ...]] = {
    "routed_experts": ("tokens", "layers", "topk"),
    "indexer_topk": ("tokens", "layers", "index_topk"),
}


@dataclass(slots=True)
class Replay:
    """Selections to replay (or that were made), per token and layer; None where the model has none.

    Leading dims are (tokens,) for one sequence, (N,) for an engine step's new
    tokens, (B, T) for a training batch.
    """

    routed_experts: Tensor | None = None  # (..., layers, moe_top_k) int32
    indexer_topk: Tensor | None = None  # (..., layers, dsa_index_topk) int32, -1 padded

    def arrays(self) -> dict[str, Tensor]:
        """The fields that are set, by name (what `ReplayStore.put` takes; `Replay(**arrays)` inverts)."""
        fields = {"routed_experts": self.routed_experts, "indexer_topk": self.indexer_topk}
        return {name: t for name, t in fields.items() if t is not None}

    def layer(self, i: int) -> Replay:
        """Layer i's selections: (..., L, k) -> (..., k)."""
        experts, kept = self.routed_experts, self.indexer_topk
        return Replay(
            None if experts is None else experts[..., i, :],
            None if kept is None else kept[..., i, :],
        )

    @staticmethod
    def stack_layers(per_layer: Sequence[Replay]) -> Replay:
        """Per-layer selections (..., k) -> (..., L, k); None where the option is off."""
        experts = [r.routed_experts for r in per_layer if r.routed_experts is not None]
        kept = [r.indexer_topk for r in per_layer if r.indexer_topk is not None]
        return Replay(
            torch.stack(experts, dim=-2) if experts else None,
            torch.stack(kept, dim=-2) if kept else None,
        )


def concat_replay(earlier: Tensor | None, later: Tensor | None) -> Tensor | None:
    """Rows of a continued sequence: the earlier request's rows, then the later's beyond them.

    A continuation (a paused request resubmitted, or the next turn of a
    multi-turn trajectory) is prompted with everything before it, so its rows
    cover the earlier positions too, computed again, possibly under newer
    weights. The earlier rows are the ones whose selections produced the
    earlier tokens' log-probs, so they win. Fold it over every request of a
    branch, in order.
    """
    if earlier is None or later is None:
        return later if earlier is None else earlier
    return torch.cat([earlier, later[len(earlier) :]])  # (len(later), L, k)


def collate_replay(
    rows: Sequence[Tensor | None], offsets: Sequence[int], num_columns: int
) -> Tensor | None:
    """Per-sequence rows (tokens_b, L, k) -> a batch (B, num_columns, L, k), -1 where not recorded.

    `offsets[b]` is the column of sequence b's position 0 (its left padding);
    row p lands in column offsets[b] + p, like the token at position p.
    """
    first = next((r for r in rows if r is not None), None)
    if first is None:
        return None
    out = torch.full((len(rows), num_columns, *first.shape[1:]), -1, dtype=first.dtype)
    for b, (r, offset) in enumerate(zip(rows, offsets, strict=True)):
        if r is not None:
            out[b, offset : offset + len(r)] = r
    return out


def left_padding(attention_mask: Tensor) -> list[int]:
    """(B, T) 1 = real token -> per row, the column of its first real token (position 0)."""
    return (attention_mask.cumsum(-1) == 0).sum(-1).tolist()


def batch_replay(rows: Sequence[Replay | None], attention_mask: Tensor) -> Replay:
    """Per-sequence replays -> one aligned with a [left-padded prompt | right-padded response] batch.

    Works on any column window that keeps each row's real tokens contiguous
    (a whole batch, or a micro-batch trimmed to its longest prompt/response).
    """
    offsets, T = left_padding(attention_mask), attention_mask.shape[1]
    return Replay(
        collate_replay([r.routed_experts if r else None for r in rows], offsets, T),
        collate_replay([r.indexer_topk if r else None for r in rows], offsets, T),
    )


# -- the store -----------------------------------------------------------------------


class ReplayEntryFreedError(LookupError):
    """A handle was read after its entry was freed (consumed or dropped) or its store closed."""


@dataclass(frozen=True, slots=True)
class ReplayHandle:
    """What travels instead of the arrays: where they are and what they look like, no data."""

    store: str  # name of the ReplayStore that holds the entry
    key: str  # name of the entry's shared-memory segment
    fields: dict[str, tuple[str, tuple[int, ...]]]  # array name -> (dtype, shape), in layout order

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays the handle stands for (what a payload transport would carry)."""
        return sum(_nbytes(dtype, shape) for dtype, shape in self.fields.values())


class ReplayStore:
    """Replay arrays in shared memory next to the engine; `put` returns the handle that travels.

    One segment per entry, so freeing an entry gives its memory back at once
    and a dropped trajectory cannot pin a shared arena. Only the creating
    process frees (`free`, `close`); any process reads (`get`, also `fetch`).
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name or f"fmr{secrets.token_hex(4)}"  # short: macOS caps names at 31 chars
        self._entries: dict[
            str, tuple[SharedMemory, str, int]
        ] = {}  # key -> (segment, traj, bytes)
        self._ids = itertools.count()
        # Unlinks whatever is still live if the store is collected or the process exits.
        self._finalizer = weakref.finalize(self, _unlink_all, self._entries, os.getpid())

    @property
    def live_entries(self) -> dict[str, str]:
        """Entries not yet freed: segment key -> trajectory id (empty after a clean run)."""
        return {key: traj for key, (_, traj, _) in self._entries.items()}

    @property
    def live_bytes(self) -> int:
        return sum(nbytes for _, _, nbytes in self._entries.values())

    def put(self, traj_id: str, arrays: Mapping[str, Tensor]) -> ReplayHandle:
        """Copy `arrays` into a new segment; the handle names it."""
        tensors = {name: t.detach().cpu().contiguous() for name, t in arrays.items()}
        fields = {name: (_dtype_name(t.dtype), tuple(t.shape)) for name, t in tensors.items()}
        offsets, size = _layout(fields)
        key = f"{self.name}_{next(self._ids)}"
        segment = SharedMemory(name=key, create=True, size=max(size, 1))
        self._entries[key] = (segment, traj_id, size)
        for t, offset in zip(tensors.values(), offsets, strict=True):
            _write(segment, offset, t)
        flowmap.counter("replay_store_bytes", self.live_bytes)
        return ReplayHandle(self.name, key, fields)

    @staticmethod
    def get(handle: ReplayHandle, rows: slice | None = None) -> dict[str, Tensor]:
        """The arrays of `handle`, or only `rows` of each (leading dim); works in any process."""
        return fetch(handle, rows)

    def free(self, handle: ReplayHandle) -> None:
        """Unlink the entry's segment (consumed or dropped); a second call does nothing."""
        entry = self._entries.pop(handle.key, None)
        if entry is None:
            return
        _unlink(entry[0])
        flowmap.counter("replay_store_bytes", self.live_bytes)

    def close(self) -> None:
        """Free every live entry; the store can still `put` afterwards."""
        _unlink_all(self._entries)

    def __enter__(self) -> ReplayStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError(
            "a ReplayStore stays in the process that created it; send its ReplayHandles instead"
        )


def fetch(handle: ReplayHandle, rows: slice | None = None) -> dict[str, Tensor]:
    """Read an entry by name from any process, copying only `rows` (step-1 slice) of each array."""
    offsets, _ = _layout(handle.fields)
    with _SegmentReader(handle.key) as segment:
        return {
            name: _read_rows(segment, offset, dtype, shape, rows)
            for (name, (dtype, shape)), offset in zip(handle.fields.items(), offsets, strict=True)
        }


def fetch_batch(handles: Sequence[ReplayHandle | None], attention_mask: Tensor) -> Replay:
    """What a DP rank calls: read its rows' entries by name and align them with its micro-batch."""
    return batch_replay(
        [None if h is None else Replay(**fetch(h)) for h in handles], attention_mask
    )


class _SegmentReader:
    """Reads byte ranges of a segment without attaching it.

    On Linux the segment is a file under /dev/shm and is read with plain file
    reads. `SharedMemory(name)` would register it with this process's resource
    tracker, which before Python 3.13 unlinks it when a reader that does not
    share the creator's tracker exits, freeing an entry under its owner.
    Elsewhere it attaches (untracked where Python allows).
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self._file: io.FileIO | None = None
        self._segment: SharedMemory | None = None
        try:
            if SHM_DIR.is_dir():
                self._file = io.FileIO(SHM_DIR / key, "rb")
            else:
                self._segment = _attach(key)
        except FileNotFoundError:
            raise ReplayEntryFreedError(
                f"replay entry {key!r} is gone: it was freed (consumed or dropped) or its store "
                "closed before this read; free an entry only after every reader has fetched it"
            ) from None

    def read(self, offset: int, nbytes: int) -> bytearray:
        if self._file is not None:
            buf = bytearray(nbytes)
            self._file.seek(offset)
            if self._file.readinto(buf) != nbytes:
                raise ReplayEntryFreedError(f"replay entry {self.key!r} is shorter than its handle")
            return buf
        assert self._segment is not None and self._segment.buf is not None
        return bytearray(self._segment.buf[offset : offset + nbytes])

    def __enter__(self) -> _SegmentReader:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
        if self._segment is not None:
            self._segment.close()


def _read_rows(
    segment: _SegmentReader, offset: int, dtype: str, shape: tuple[int, ...], rows: slice | None
) -> Tensor:
    dt = getattr(torch, dtype)
    if rows is not None and shape:
        start, stop, step = rows.indices(shape[0])
        if step != 1:
            raise ValueError(f"rows must be a contiguous slice (step 1), got {rows}")
        row_bytes = _nbytes(dtype, shape[1:])
        offset += start * row_bytes
        shape = (max(stop - start, 0), *shape[1:])
    nbytes = _nbytes(dtype, shape)
    if nbytes == 0:
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(segment.read(offset, nbytes), dtype=dt).view(shape)


def _write(segment: SharedMemory, offset: int, t: Tensor) -> None:
    if t.numel() == 0:
        return
    dst = torch.frombuffer(segment.buf, dtype=torch.uint8, count=t.nbytes, offset=offset)
    dst.copy_(t.reshape(-1).view(torch.uint8))
    del dst  # releases the export of segment.buf, or closing the segment would fail


def _unlink(segment: SharedMemory) -> None:
    segment.close()
    try:
        segment.unlink()
    except FileNotFoundError:
        pass  # a reader or an earlier crash already removed it


def _unlink_all(entries: dict[str, tuple[SharedMemory, str, int]], owner_pid: int = 0) -> None:
    if owner_pid and os.getpid() != owner_pid:
        return  # a forked child exiting: the segments belong to its parent
    while entries:
        _unlink(entries.popitem()[1][0])


def _attach(key: str) -> SharedMemory:
    try:
        return SharedMemory(name=key, track=False)  # type: ignore[call-arg]  # Python >= 3.13
    except TypeError:
        return SharedMemory(name=key)


def _layout(fields: Mapping[str, tuple[str, tuple[int, ...]]]) -> tuple[list[int], int]:
    """Byte offset of each array (in field order, cache-line aligned) and the segment's size."""
    offsets, end = [], 0
    for dtype, shape in fields.values():
        offsets.append(end)
        end += -(-_nbytes(dtype, shape) // ALIGN_BYTES) * ALIGN_BYTES
    return offsets, end


def _nbytes(dtype: str, shape: Sequence[int]) -> int:
    return math.prod(shape) * getattr(torch, dtype).itemsize


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
