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

`Tensor.resize_` past a storage's size moves it the same way (a buffer grown in place):
wrapped too, the move told alike.

Cost: two `data_ptr` reads per storage shared or tensor resized (a multiprocessing send
of a tensor not yet in shared memory, or `share_memory_`); nothing for a storage shared
already but the reads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from flowmap.capture import state
from flowmap.writer.storage_refs import storage_of

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


def install_resize(module: ModuleType) -> None:
    """Wrap `torch.Tensor.resize_` (idempotent): growing a tensor past its storage moves the
    storage to a new allocation and frees the old one, as a share does."""
    cls = getattr(module, "Tensor", None)
    if cls is None or getattr(cls, _MARK, False):
        return
    resize = getattr(cls, "resize_", None)
    if resize is not None:
        cls.resize_ = _resizing(resize)
    setattr(cls, _MARK, True)


def _resizing(resize: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(resize)
    def flowmap_resize_(self: Any, *args: Any, **kwargs: Any) -> Any:
        t = state.tracer
        storage = storage_of(self) if t is not None else None  # a plain tensor's, else None
        if storage is None:
            return resize(self, *args, **kwargs)
        try:
            before, nbytes = storage.data_ptr(), storage.nbytes()
        except Exception:
            return resize(self, *args, **kwargs)
        out = resize(self, *args, **kwargs)
        try:
            after = storage.data_ptr()
            if after != before and before and storage_of(self) is storage:
                w = t.writer  # type: ignore[union-attr]
                with w.lock:
                    if not t.closed:  # type: ignore[union-attr]
                        w.left(before, after, nbytes, storage)
        except Exception as exc:  # never into the program's call
            t.error(exc)  # type: ignore[union-attr]
        return out

    return flowmap_resize_
