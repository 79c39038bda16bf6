"""Storages torch moved into shared memory, and the addresses they left.

`share_memory_` and every multiprocessing send of a CPU tensor copy its storage into a
shared segment and free the old allocation; the storage object lives on at the new
address (`flowmap.integrations.shared_moves` tells the table). What was named at the
old addresses (the storage's start, its views) is named at the new ones from then on,
and a hop described before the send moved it (a queue describes what it is handed, then
pickles it) reads its keys at the new addresses too. The old addresses name nothing: the
next tensor allocated there is another.

Cost: nothing for a hop while no storage moved; a storage read per tensor of a hop
after one did, in a process that keeps the latest `MAX_MOVED`.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Sequence
from typing import Any

from flowmap.writer.storage_refs import storage_of

MAX_MOVED = 256  # storages moved into shared memory whose old start is kept


class MovedStorages:
    """id(torch storage) -> (its old start, its new one, its bytes, a weak reference to it)."""

    def __init__(self) -> None:
        self.moved: dict[int, tuple[int, int, int, weakref.ref[Any]]] = {}

    def __bool__(self) -> bool:
        return bool(self.moved)

    def note(self, old: int, new: int, nbytes: int, storage: Any,
             named: list[Hashable]) -> list[tuple[int, int]]:
        """`storage` moved from `old` to `new`; `named`, the keys of it named so far (its
        views' starts), are rewritten in place. Returns each old key of it and its new one,
        its start first."""
        moved = self.moved
        if len(moved) >= MAX_MOVED:
            del moved[next(iter(moved))]
        moved[id(storage)] = (old, new, nbytes, weakref.ref(storage))
        end = old + max(nbytes, 1)
        pairs = [(key, key - old + new) for key in [old, *named]
                 if type(key) is int and old <= key < end]
        named[:] = [k - old + new if type(k) is int and old <= k < end else k for k in named]
        return list(dict(pairs).items())

    def keys(self, keys: Sequence[Hashable], holders: Sequence[Any]) -> list[Hashable]:
        """`keys` (in step with `holders`) read before their storages moved, at the new
        addresses."""
        out = list(keys)
        moved = self.moved
        for i, key in enumerate(keys):
            if type(key) is not int:
                continue
            storage = storage_of(holders[i])
            m = moved.get(id(storage)) if storage is not None else None
            if m is not None and m[3]() is storage and m[0] <= key < m[0] + max(m[2], 1):
                out[i] = key - m[0] + m[1]
        return out
