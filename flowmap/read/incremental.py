"""Read a run, finished or still being written: each poll takes only what every shard appended.

`flowmap.load` (one poll of a finished run, every shard read to its end), `flowmap top`,
the live page and `/metrics` read through this one reader, so a growing run reads as the
finished run reads the same bytes. A watch's state stays bounded (docs/live.md, "The
incremental reader"): hops fold past a detail window, counter samples past `MAX_RECORDS`
(`flowmap.read.bounds`), transport halves once joined (`flowmap.read.settle`), and steps
past a horizon into blocks (`flowmap.read.blocks`), all held in `flowmap.read.live_bounds`.
A watch holds `flowmap report`'s window and reads its frames in a smaller one
(`live_hops`), so the run's end is a snapshot of what it holds (`records(whole=True)`),
not a second read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any, TypeVar

from flowmap import trace_format as tf
from flowmap.errors import FlowmapError, NotATrace
from flowmap.read.blocks import StepBlocks
from flowmap.read.events import Shard
from flowmap.read.fold import shard_budget
from flowmap.read.identity import host_key, host_labels, run_pids
from flowmap.read.live_bounds import LiveBounds
from flowmap.read.plain import show_path
from flowmap.read.ray_transport import name_ray_transports
from flowmap.read.reader import read_header
from flowmap.read.run_meta import read_run_meta
from flowmap.read.settle import HalfSettler
from flowmap.read.shards import scan_run
from flowmap.read.tail import ShardTail

# Hops each process of a live run keeps one by one (`flowmap.read.fold.shard_budget`); every
# kept hop is read again at each update, so this bounds an update's cost (docs/live.md).
LIVE_DETAIL_HOPS = 500


R = TypeVar("R")


class RunGone(FlowmapError):
    """The run directory (or shard) being watched was removed."""


class IncrementalReader:
    """Reads a run directory (or one shard file), finished or as it grows.

    `poll()` reads what was appended since the last poll; `records(Run)` is the run
    as `flowmap.load(path, detail_hops)` would read the bytes handled so far.
    """

    def __init__(self, path: str | os.PathLike[str], detail_hops: int | None = LIVE_DETAIL_HOPS,
                 blocks: StepBlocks | None = None, settler: HalfSettler | None = None,
                 finished: bool = False, live_hops: int | None = None) -> None:
        self.path = os.fspath(path)
        # A finished run (`flowmap.load`): one poll reads every shard to its end, an empty
        # file is an empty shard, and a lone file that is not a shard raises NotATrace.
        self.finished = finished
        self.detail_hops = detail_hops
        # A live watch's bounds: old steps held in blocks past a horizon, transport halves
        # joined once (`settler`), frames in a window of `live_hops`; without blocks, every
        # step and half kept, and the records are exactly those `flowmap.load` reads.
        self.bounds = None if blocks is None else LiveBounds(blocks, settler or HalfSettler(
            keep_hops=LIVE_DETAIL_HOPS if detail_hops is None else detail_hops,
            live_hops=live_hops), live_hops)
        self.tails: dict[str, ShardTail] = {}
        self.skipped: list[str] = []  # entries of the directory that are not shard files
        self.bytes_read = 0
        self.identity: tuple[int, int] | None = None  # the run directory's (device, inode)

    def poll(self) -> int:
        """Read every shard's new bytes (new shards too); returns the bytes handled. Raises
        RunGone once the run is removed, NotATrace if it never held a run."""
        try:
            paths, self.skipped = scan_run(self.path)
        except NotATrace as exc:
            if self.tails and not os.path.exists(self.path):
                raise _gone(self.path) from None
            if "holds no flowmap shards" in str(exc) and not self.finished:
                return 0  # a run directory whose first process has not written yet
            raise
        self._same_directory(paths)
        new = [p for p in paths if p not in self.tails]
        if new:  # numbered and named as the run's processes and hosts (`flowmap.read.identity`)
            headers = [read_header(p) or {} for p in paths]
            pids, labels = run_pids(headers), host_labels([h for h in headers if h])
            budget = shard_budget(self.detail_hops, len(paths))
            for p, h, pid in zip(paths, headers, pids):
                if p not in self.tails:
                    self.tails[p] = ShardTail(p, budget, pid if h else None,
                                              labels.get(host_key(h), ""))
                    if self.bounds is not None:
                        self.bounds.opened(p, len(paths))
        if self.finished:
            for p in new:
                try:
                    self.tails[p].finish()
                except NotATrace as exc:
                    if len(paths) == 1 and not self.skipped and p == self.path:
                        raise
                    self.tails[p].problem = f"{exc}; skipped"
            return 0
        got = sum(t.poll() for t in self.tails.values())
        self.bytes_read += got
        return got

    def _same_directory(self, paths: list[str]) -> None:
        """Raise RunGone if the run directory was removed and made anew since the last poll (a
        tracer started over in it: a shard read before is gone, or the directory is new)."""
        try:
            st = os.stat(self.path)
            identity = (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
        except OSError:
            identity = None
        if not self.tails.keys() <= set(paths) or (
                identity and self.identity and identity != self.identity):
            raise _gone(self.path)
        self.identity = identity or self.identity

    @property
    def more(self) -> bool:
        """Whether the last poll left bytes unread (a shard read up to MAX_READ)."""
        return any(t.capped for t in self.tails.values())

    def shards(self) -> list[Shard]:
        """The shards read so far, each as the finished reader would return it (sorted by path)."""
        return [sh for p in sorted(self.tails) if (sh := self.tails[p].snapshot()) is not None]

    def problems(self, shards: list[Shard]) -> list[str]:
        """A sentence per problem: each entry skipped, each shard's (raises NotATrace when a
        finished run has no readable shard)."""
        problems = list(self.skipped)
        for t in (self.tails[p] for p in sorted(self.tails)):
            sh = t.done or t.shard
            problems += [t.problem] if t.problem is not None else sh.problems() if sh else []
        if self.finished and not shards:
            raise NotATrace(problems[0] if problems
                            else f"{show_path(self.path)} holds no readable shards")
        return problems

    @property
    def settler(self) -> HalfSettler | None:
        return self.bounds.settler if self.bounds is not None else None

    def records(self, cls: Callable[[str, list[Shard], dict[str, Any], list[str], set[str]], R],
                whole: bool = False) -> R:
        """The run as read so far, as `cls.read(path, detail_hops)` would read the bytes
        handled (`flowmap.model.run.Run` for the figures), old steps in blocks where the
        reader has them, in the frames' window (`live_hops`) unless `whole`; a new one each
        call: the model is built whole."""
        bounds = self.bounds
        shards = self.shards() if bounds is None else bounds.snapshot(self.tails, whole)
        problems = self.problems(shards)
        meta = (read_run_meta(os.path.join(self.path, tf.RUN_META), problems)
                if os.path.isdir(self.path) else {})
        name_ray_transports(shards)  # idempotent: a kept hop is renamed once
        return cls(self.path, shards, meta, problems, bounds.settler.shared if bounds else set())


def _gone(path: str) -> RunGone:
    return RunGone(f"the run {show_path(path)} was removed while watched")
