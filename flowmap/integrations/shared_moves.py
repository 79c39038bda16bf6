"""Storages torch moves into shared memory: the address each leaves is free for the next.

`share_memory_`, and every multiprocessing send of a CPU tensor (torch's reductions call
the same), copy a storage into a shared segment and free its old allocation; the storage
object lives on at the new address. The tracer names storages by address for as long as
the object that showed it lives (`flowmap.writer.storage_table`), so the old address, kept,
would name the next tensor allocated there as this one, and a view of the moved storage,
sent at its new address, would not be known as part of what was named at its start.
Both `_share_fd_cpu_` and `_share_filename_cpu_` (the two strategies) are wrapped on
`torch.UntypedStorage`: a start address that changed is a move, told to the tracer's
table (`StorageTable.left`), which names the storage at its new address from then on.

Cost: two `data_ptr` reads per storage shared (a multiprocessing send of a tensor not yet
in shared memory, or `share_memory_`); nothing for a storage shared already but the reads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from flowmap.capture import state

_MARK = "__flowmap_moves__"


def install(module: ModuleType) -> None:
    """Wrap `torch.storage.UntypedStorage`'s two share methods (idempotent)."""
    cls = getattr(module, "UntypedStorage", None)
    if cls is None or getattr(cls, _MARK, False):
        return
    for name in ("_share_fd_cpu_", "_share_filename_cpu_"):
        share = cls.__dict__.get(name)
        if share is not None:
            setattr(cls, name, _watching(share))
    setattr(cls, _MARK, True)


def _watching(share: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(share)
    def flowmap_share(self: Any, *args: Any, **kwargs: Any) -> Any:
        t = state.tracer
        if t is None:
            return share(self, *args, **kwargs)
        try:
            before = self.data_ptr()
        except Exception:
            return share(self, *args, **kwargs)
        out = share(self, *args, **kwargs)
        try:
            after = self.data_ptr()
            if after != before and before:
                w = t.writer
                with w.lock:
                    if not t.closed:
                        w.left(before, after, self.nbytes(), self)
        except Exception as exc:  # never into the program's send
            t.error(exc)
        return out

    return flowmap_share
