"""Read one shard, finished or growing: its offset, and the one feed of its lines.

A finished file and a watched one are read alike: the bytes up to the
first NUL (a mapped shard's reserved, unwritten tail) go to one
`flowmap.read.reader.ShardFeed`, so a growing shard reads as the finished one.
"""

from __future__ import annotations

import os
from typing import BinaryIO

from flowmap.errors import NotATrace
from flowmap.read.bounds import bound_records
from flowmap.read.events import Shard
from flowmap.read.plain import show_path
from flowmap.read.reader import MAX_HEADER, ShardFeed, new_shard, open_regular, parse_header

MAX_READ = 4 << 20  # bytes taken from one shard in one poll; the rest waits for the next
FIRST_READ = 64 << 10  # a poll's first read of a shard; each next one twice the last


class ShardTail:
    """One shard being read (a finished file) or followed: its offset, and its feed."""

    def __init__(self, path: str, budget: int | None, pid: int | None = None,
                 host_label: str | None = None) -> None:
        self.path, self.budget = path, budget
        self.pid, self.host_label = pid, host_label  # as the run numbers and names them
        self.done: Shard | None = None  # a finished file, read to its end
        self.problem: str | None = None  # why this file is not read (not a flowmap shard)
        self.capped = False  # the last poll stopped at MAX_READ: more is waiting
        self._reset()

    def _reset(self) -> None:
        """Read from the start (again: the file was cut and written anew)."""
        self.pos = 0  # bytes read
        self.head = b""  # the header's first bytes, until its newline is read
        self.feed: ShardFeed | None = None

    @property
    def shard(self) -> Shard | None:
        return self.feed.shard if self.feed is not None else None

    def poll(self) -> int:
        """Read what was appended (up to MAX_READ); returns the bytes handled (0: nothing new)."""
        if self.problem is not None:
            return 0
        try:
            with open_regular(self.path) as f:
                if os.fstat(f.fileno()).st_size < self.pos:  # cut and rewritten: start over
                    self._reset()
                f.seek(self.pos)
                data, self.capped = _read_to_nul(f)
        except NotATrace:
            return 0  # vanished between listing and opening; the next listing says so
        try:
            got = self.take(data)
        except NotATrace as exc:
            self.problem = f"{exc}; skipped"
            return 0
        if self.feed is not None:
            bound_records(self.feed.shard)
        return got

    def take(self, data: bytes) -> int:
        """The shard's next bytes (none of them NUL); returns the bytes handled. Raises
        NotATrace for a header that is not a shard's."""
        self.pos += len(data)
        got, feed = 0, self.feed
        if feed is None:
            data = self.head + data
            nl = data.find(b"\n", 0, MAX_HEADER + 1)
            if nl < 0:
                if len(data) > MAX_HEADER:
                    raise NotATrace(f"{show_path(self.path)} is not a flowmap trace")
                self.head = data  # the header's next bytes come in a later poll
                return 0
            feed = self.start(data[:nl + 1])
            data, got, self.head = data[nl + 1:], nl + 1, b""
        before = feed.handled
        feed.take(data)
        return got + feed.handled - before

    def start(self, header: bytes) -> ShardFeed:
        """The feed of the shard whose header line is `header`."""
        sh = new_shard(self.path, parse_header(header, self.path), self.pid)
        if self.host_label is not None:  # "": the run names its host by its hostname
            sh.host_label = self.host_label or sh.host
        self.feed = ShardFeed(sh, self.budget)
        return self.feed

    def finish(self) -> Shard:
        """Read a finished file to its end; raises NotATrace."""
        with open_regular(self.path) as f:
            more, empty = True, not os.fstat(f.fileno()).st_size
            while more:  # up to the zeros after the last event of a mapped shard
                data, more = _read_to_nul(f)
                self.take(data)
        if empty:
            self.done = Shard(path=self.path, pid=0, ppid=0, host="", argv=[], process=None,
                              t0_mono_ns=0, t0_wall_ns=0, empty=True)
        else:  # a header without its newline: the whole file
            feed = self.feed or self.start(self.head)
            self.done = feed.snapshot(copy=False)  # a partial last line: dropped
        return self.done

    def snapshot(self) -> Shard | None:
        """The shard as `finish` would return it for the bytes handled so far."""
        if self.done is not None:
            return self.done
        return self.feed.snapshot() if self.feed is not None else None

    def retire(self, before: int) -> None:
        """Forget the folded steps below `before` (a watch's `flowmap.read.blocks` hold them
        now; their later hops fold into records of their own). Right after `snapshot`."""
        if self.feed is not None:
            d = self.feed.decoder
            d.shard.seam_steps[:] = [st for st in d.shard.seam_steps  # `a` events (aggregated)
                                     if st.step is None or st.step >= before]
            if d.folder is not None:  # cells keyed (src, dst, name, step, transport)
                d.folder.cells = {k: c for k, c in d.folder.cells.items()
                                  if k[3] is None or k[3] >= before}


def _read_to_nul(f: BinaryIO) -> tuple[bytes, bool]:
    """The bytes from `f`'s position to its first NUL (a mapped shard's reserved, unwritten
    tail, tens of MB in a long run) or its end, at most MAX_READ; and whether more waits. Read
    in growing pieces, so a poll reads about what was appended, not the zeros after it."""
    pieces, got, size = [], 0, FIRST_READ
    while got < MAX_READ:
        want = min(size, MAX_READ - got)
        piece = f.read(want)
        nul = piece.find(b"\0")
        pieces.append(piece if nul < 0 else piece[:nul])
        if nul >= 0 or len(piece) < want:
            return b"".join(pieces), False
        got, size = got + len(piece), size * 2
    return b"".join(pieces), True
