"""Price a storage sent through shared memory once a step, as torch moves it.

torch.multiprocessing's reducers put a CPU tensor's storage in shared memory
the first time it is sent and pass a handle after: the same storage sent on
two queues, twice, or as several views that start where it does, is copied
once. Pickle writes the data into every message, so a pickled hop keeps its
bytes. Each send half of transport `shm` is therefore priced at what its
process had not yet moved of its storages in that step; the rest is a handle
(its `wire_bytes` still say what the message itself was).

Storage ids are per process and live only while their storage does
(`flowmap.writer.encoder`), so a freed storage's address reused by a new
tensor is never taken for it. A hop whose tensors and storages do not line up
(tensors folded in a list) keeps its bytes.
"""

from __future__ import annotations

from flowmap.read.events import Hop
from flowmap.trace_format import SHM

MAX_STEPS = 4  # steps whose storages a process remembers: a queue's feeder lags a step or two


class SharedOnce:
    """One process's shared-memory storages already moved, by step."""

    __slots__ = ("moved",)

    def __init__(self) -> None:
        self.moved: dict[int | None, dict[int, int]] = {}  # step -> storage id -> bytes moved

    def price(self, hop: Hop) -> None:
        """Take from `hop.nbytes` what of its storages already moved this step (`hop` is a
        send half's hop, in the order its process wrote it)."""
        if hop.transport != SHM or not hop.storages:
            return
        sizes = [leaf.nbytes for leaf in hop.leaves if leaf.kind == "tensor"]
        if len(sizes) != len(hop.storages):
            return
        here: dict[int, int] = {}
        for sid, b in zip(hop.storages, sizes):  # views of one storage in a hop count once
            if b > here.get(sid, 0):
                here[sid] = b
        moved = self.moved.get(hop.step)
        if moved is None:
            if len(self.moved) >= MAX_STEPS:
                del self.moved[next(iter(self.moved))]
            moved = self.moved[hop.step] = {}
        spared = 0
        for sid, b in here.items():
            before = moved.get(sid, 0)
            spared += min(before, b)
            if b > before:
                moved[sid] = b
        if spared:
            hop.nbytes = max(0, hop.nbytes - spared)
