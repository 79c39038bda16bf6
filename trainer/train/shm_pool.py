"""A pool of shared-memory slots: tensors cross processes by offset, not by pickle.

Each slot is one flat uint8 tensor in shared memory, created by the driver
and handed to the rank processes once, when they are spawned. After that a
batch moves by writing its tensors into a free slot and sending only their
layout, `{key, dtype, shape, offset}` per tensor (the metadata verl sends next
to its CUDA-IPC weight buckets): the queue carries a few hundred bytes, the
payload stays where it was written and the reader takes views of it.

A slot is reused only after its reader says it is done (the driver's free list).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

ALIGN_BYTES = 64  # every tensor starts on a cache line; also keeps dtype views legal


@dataclass(slots=True, frozen=True)
class TensorSpec:
    key: str
    dtype: str  # "float32", "int64", ...
    shape: tuple[int, ...]
    offset: int  # bytes from the start of the slot

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * getattr(torch, self.dtype).itemsize


def bytes_needed(shapes: Iterable[tuple[int, ...]], itemsize: int) -> int:
    """Slot size that holds tensors of these shapes back to back, aligned like `write` does."""
    total = 0
    for shape in shapes:
        n = itemsize
        for d in shape:
            n *= d
        total += -(-n // ALIGN_BYTES) * ALIGN_BYTES
    return total


def new_slot(num_bytes: int) -> Tensor:
    """A flat shared-memory byte buffer (shareable with spawned children)."""
    return torch.zeros(num_bytes, dtype=torch.uint8).share_memory_()


def write(slot: Tensor, tensors: Iterable[tuple[str, Tensor]]) -> list[TensorSpec]:
    """Copy tensors into `slot` back to back; returns their layout."""
    specs: list[TensorSpec] = []
    offset = 0
    for key, t in tensors:
        t = t.detach().contiguous()
        nbytes = t.numel() * t.element_size()
        if offset + nbytes > slot.numel():
            raise ValueError(
                f"shared-memory slot of {slot.numel():,} bytes cannot hold {key!r}; "
                "raise train.shm_slot_bytes"
            )
        view(slot, TensorSpec(key, _name(t.dtype), tuple(t.shape), offset)).copy_(t)
        specs.append(TensorSpec(key, _name(t.dtype), tuple(t.shape), offset))
        offset += -(-nbytes // ALIGN_BYTES) * ALIGN_BYTES
    return specs


def view(slot: Tensor, spec: TensorSpec) -> Tensor:
    """The tensor `spec` describes, as a view of the slot's memory (no copy)."""
    raw = slot[spec.offset : spec.offset + spec.nbytes]
    return raw.view(getattr(torch, spec.dtype)).view(spec.shape)


def read(slot: Tensor, specs: Iterable[TensorSpec]) -> dict[str, Tensor]:
    return {s.key: view(slot, s) for s in specs}


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class SlotPool:
    """The driver's free list over a set of slots."""

    def __init__(self, num_slots: int, slot_bytes: int) -> None:
        self.slots = [new_slot(slot_bytes) for _ in range(num_slots)]
        self.free = list(range(num_slots))

    def acquire(self) -> int:
        if not self.free:
            raise RuntimeError("no free shared-memory slot: a reader has not released one")
        return self.free.pop(0)

    def release(self, index: int) -> None:
        if index in self.free:
            raise RuntimeError(f"shared-memory slot {index} released twice")
        self.free.append(index)
