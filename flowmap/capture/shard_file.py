"""The shard on disk: a file mapping that every event is copied into at once.

Why a mapping: a page of a shared file mapping belongs to the kernel's page
cache, so an event copied into it is in the file the moment the copy ends —
a SIGKILL, the OOM killer or `os._exit` a microsecond later keeps it, even
while a long C call holds the GIL and no Python thread could flush a buffer.
The copy is a `memcpy`, cheaper than buffering lines and writing them.

The file grows in chunks. Each chunk is reserved with `posix_fallocate`
first: writing into a page of a sparse file on a full disk raises SIGBUS and
kills the program, reserving the blocks turns that into an `ENOSPC` we can
report. The unwritten tail of the last chunk is zeros, which readers skip;
`close` cuts the file to the bytes written. A small reserve at the end of
every chunk leaves room for the closing events when the disk is full.

Where a mapping cannot be made (a file system without mmap), every event is
written with one `os.write`: just as durable, slower.
"""

from __future__ import annotations

import mmap
import os

FIRST_CHUNK = 1 << 20
MAX_CHUNK = 32 << 20
RESERVE = 4096  # kept free in every chunk for the closing events
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


class ShardFull(OSError):
    """The file could not grow (full disk, quota): what was written stays."""


class ShardFile:
    """Append-only bytes in a file, durable once `write` returns."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, _FLAGS, 0o644)
        self.pos = 0
        self.size = 0
        self.limit = 0  # size - RESERVE: where the next chunk must be reserved
        self.map: mmap.mmap | None = None
        try:
            self._reserve(FIRST_CHUNK)
            self.map = mmap.mmap(self.fd, self.size)  # shared, read-write
        except ShardFull:
            os.close(self.fd)
            raise
        except (OSError, ValueError):
            self.map = None  # no mapping here: plain writes
            os.ftruncate(self.fd, 0)
            self.size = self.limit = 0

    def write(self, data: bytes) -> None:
        """Copy `data` (whole lines) into the shard; raises ShardFull when the disk is."""
        m = self.map
        end = self.pos + len(data)
        if m is None:
            self._write_fd(data)
            return
        if end > self.limit:
            self._grow(end)
        m[self.pos:end] = data
        self.pos = end

    def write_reserved(self, data: bytes) -> bool:
        """Write into the reserve (closing events after ShardFull); False if it does not fit."""
        m = self.map
        end = self.pos + len(data)
        try:
            if m is None:
                self._write_fd(data)
                return True
            if end > self.size:
                return False
            m[self.pos:end] = data
            self.pos = end
            return True
        except (OSError, ValueError):
            return False

    def deleted(self) -> bool:
        """Whether the file was unlinked (its run directory removed) since it was opened."""
        try:
            return os.fstat(self.fd).st_nlink == 0
        except OSError:
            return True

    def contents(self) -> bytes:
        """The bytes written so far (to restore a deleted shard)."""
        if self.map is not None:
            return self.map[: self.pos]
        try:
            return os.pread(self.fd, self.pos, 0)
        except OSError:
            return b""

    def close(self) -> None:
        """Cut the file to the bytes written and release it (idempotent)."""
        if self.map is not None:
            try:
                self.map.close()
            except (OSError, ValueError, BufferError):
                pass
            self.map = None
        if self.fd >= 0:
            try:
                os.ftruncate(self.fd, self.pos)
            except OSError:
                pass
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def abandon(self) -> None:
        """Forget the file without touching it (a forked child's copy of its parent's shard)."""
        if self.map is not None:
            try:
                self.map.close()  # unmaps in this process only
            except (OSError, ValueError, BufferError):
                pass
            self.map = None
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    # -- growth ---------------------------------------------------------------
    def _reserve(self, new_size: int) -> None:
        try:
            os.posix_fallocate(self.fd, self.size, new_size - self.size)
        except OSError as exc:
            if exc.errno in (28, 122):  # ENOSPC, EDQUOT
                raise ShardFull(exc.errno, exc.strerror) from None
            if exc.errno not in (95, 22):  # EOPNOTSUPP, EINVAL: no fallocate; grow sparse
                raise
            os.ftruncate(self.fd, new_size)
        self.size = new_size
        self.limit = new_size - RESERVE

    def _grow(self, end: int) -> None:
        step = min(max(self.size, FIRST_CHUNK), MAX_CHUNK)
        new_size = self.size + step
        while new_size - RESERVE < end:
            new_size += step
        assert self.map is not None
        self._reserve(new_size)
        self.map.resize(new_size)

    def _write_fd(self, data: bytes) -> None:
        try:
            while data:
                n = os.write(self.fd, data)
                data = data[n:]
                self.pos += n
        except OSError as exc:
            raise ShardFull(exc.errno or 0, exc.strerror or str(exc)) from None
