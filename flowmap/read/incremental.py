"""Read a run, finished or still being written: each poll takes only what every shard appended.

`flowmap.load` (`Records.read`: one poll of a finished run, every shard read
to its end), `flowmap top`, the live page and `/metrics` are consumers of
this one reader. Each shard is a `flowmap.read.tail.ShardTail`, which hands
only the complete lines appended since the last poll to its decoder, so a
growing run reads exactly as the finished run reads the same bytes: the same
shards, numbered and named as the run's processes and hosts, the same
problems. New shards (a rank or Ray worker that starts later) are picked up
at the next poll.

A watch's state stays bounded, whatever the run's length: past a detail window the
decoder folds hops into per-seam, per-step records (as `flowmap.load` does
for a long trace); steps older than a horizon are held in blocks of steps
(`flowmap.read.blocks`, when a watch asks for them), a transport message's
halves are joined once, once both are read, and held as what they made
(`flowmap.read.settle`), and a shard's counter
samples, marks and drops past `MAX_RECORDS` are folded, oldest first, into
per-name records whose count, sum, least, largest and last value are exact.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from flowmap import trace_format as tf
from flowmap.errors import FlowmapError, NotATrace
from flowmap.read.blocks import StepBlocks
from flowmap.read.bounds import MAX_RECORDS as MAX_RECORDS  # re-exported: the bound on records
from flowmap.read.events import SendFold, SendHalf, Shard
from flowmap.read.fold import DETAIL_HOPS, shard_budget
from flowmap.read.identity import host_key, host_labels, run_pids
from flowmap.read.plain import show_path
from flowmap.read.ray_transport import name_ray_transports
from flowmap.read.reader import read_header
from flowmap.read.run_meta import read_run_meta
from flowmap.read.settle import HalfSettler
from flowmap.read.shards import scan_run
from flowmap.read.tail import ShardTail

# Hops each process of a live run keeps one by one (`flowmap.read.fold.shard_budget`: and
# the rest of the step they end in, to twice that), for the findings that need per-hop
# identity; past it every hop is folded per seam and step. Every kept hop is read again
# at each update (the model is built whole), so this bounds an update's cost as much as
# seams x steps do: at 2,000, four processes kept 12,000 hops and their rebuilds cost
# three times as much.
LIVE_DETAIL_HOPS = 500


class _Records(Protocol):
    shared_channels: list[str]  # what `flowmap.read.records.Records` is built with, and has


R = TypeVar("R", bound=_Records)


def read_run_shards(path: str, detail_hops: int | None = DETAIL_HOPS
                    ) -> tuple[list[Shard], list[str]]:
    """Every readable shard of a finished run and a sentence per problem (empty, bad lines,
    skipped); each shard keeps its share of `detail_hops` (None: every hop). A run whose
    every shard is unreadable raises NotATrace with the first reason."""
    reader = IncrementalReader(path, detail_hops, finished=True)
    reader.poll()
    return reader.read()


class RunGone(FlowmapError):
    """The run directory (or shard) being watched was removed."""


class IncrementalReader:
    """Reads a run directory (or one shard file), finished or as it grows.

    `poll()` reads what was appended since the last poll; `records(Run)` is the run
    as `flowmap.load(path, detail_hops)` would read the bytes handled so far.
    """

    def __init__(self, path: str | os.PathLike[str], detail_hops: int | None = LIVE_DETAIL_HOPS,
                 blocks: StepBlocks | None = None, settler: HalfSettler | None = None,
                 finished: bool = False) -> None:
        self.path = os.fspath(path)
        # A finished run (`flowmap.load`): one poll reads every shard to its end, an empty
        # file is an empty shard, and a lone file that is not a shard raises NotATrace.
        self.finished = finished
        self.detail_hops = detail_hops
        # Where old steps go, past a horizon (a live watch's), and where transport halves are
        # joined once, as they are read; None: every step and half kept, and the records are
        # exactly those `flowmap.load` reads from the same bytes.
        self.blocks = blocks
        self.settler = settler if settler is not None or blocks is None else HalfSettler(
            keep_hops=LIVE_DETAIL_HOPS if detail_hops is None else detail_hops)
        self.tails: dict[str, ShardTail] = {}
        self.skipped: list[str] = []  # entries of the directory that are not shard files
        self.bytes_read = 0
        self.identity: tuple[int, int] | None = None  # the run directory's (device, inode)

    def poll(self) -> int:
        """Read every shard's new bytes (new shards too); returns the bytes handled.

        Raises RunGone once the run is removed, NotATrace if it never held a run.
        """
        try:
            paths, self.skipped = scan_run(self.path)
        except NotATrace as exc:
            if self.tails and not os.path.exists(self.path):
                raise RunGone(f"the run {show_path(self.path)} was removed while watched") from None
            if "holds no flowmap shards" in str(exc) and not self.finished:
                return 0  # a run directory whose first process has not written yet
            raise
        self._same_directory(paths)
        new = [p for p in paths if p not in self.tails]
        if new:  # numbered and named as the run's processes and hosts (`flowmap.read.identity`)
            headers = [read_header(p) or {} for p in paths]
            pids, labels = run_pids(headers), host_labels([h for h in headers if h])
            budget = shard_budget(self.detail_hops, len(paths))
            fresh = set(new)
            for p, h, pid in zip(paths, headers, pids):
                if p in fresh:
                    self.tails[p] = ShardTail(p, budget, pid if h else None,
                                              labels.get(host_key(h), ""))
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
        """Raise RunGone if the run directory was removed and made anew since the last poll
        (a tracer started over in it: a shard read before is gone, or the directory is
        another one): what the tails hold belongs to the removed one."""
        if not self.tails.keys() <= set(paths):
            raise RunGone(f"the run {show_path(self.path)} was removed while watched")
        try:
            st = os.stat(self.path)
        except OSError:
            return
        if not stat.S_ISDIR(st.st_mode):
            return
        identity = (st.st_dev, st.st_ino)
        if self.identity is not None and identity != self.identity:
            raise RunGone(f"the run {show_path(self.path)} was removed while watched")
        self.identity = identity

    @property
    def more(self) -> bool:
        """Whether the last poll left bytes unread (a shard read up to MAX_READ)."""
        return any(t.capped for t in self.tails.values())

    @property
    def num_shards(self) -> int:
        return sum(1 for t in self.tails.values() if t.shard is not None)

    def shards(self) -> list[Shard]:
        """The shards read so far, each as the finished reader would return it (sorted by path)."""
        out = []
        for p in sorted(self.tails):
            sh = self.tails[p].snapshot()
            if sh is not None:
                out.append(sh)
        return out

    def read(self) -> tuple[list[Shard], list[str]]:
        """The shards read so far, and what went wrong reading the run."""
        shards = self.shards()
        name_ray_transports(shards)
        return shards, self.problems(shards)

    def problems(self, shards: list[Shard]) -> list[str]:
        """A sentence per problem: each entry skipped, each shard's (raises NotATrace when a
        finished run has no readable shard)."""
        problems = list(self.skipped)
        for p in sorted(self.tails):
            t = self.tails[p]
            sh = t.done or t.shard
            if t.problem is not None:
                problems.append(t.problem)
            elif sh is not None:
                problems.extend(sh.problems())
        if self.finished and not shards:
            raise NotATrace(problems[0] if problems
                            else f"{show_path(self.path)} holds no readable shards")
        return problems

    def records(self, cls: Callable[[str, list[Shard], dict[str, Any], list[str]], R]) -> R:
        """The run as read so far, as `cls.read(path, detail_hops)` would read the bytes
        handled (`flowmap.model.run.Run` for the figures), old steps in blocks where the
        reader has them; a new one each call: the model is built whole."""
        shards = self.shards()
        newest = _newest_step(shards) if self.blocks is not None else None
        if self.settler is not None:
            before = None if newest is None or self.blocks is None \
                else self.blocks.before(newest)
            live = {t.path: t.shard.halves for t in self.tails.values() if t.shard is not None}
            self.settler.settle(list(live.values()), before)
            for sh in shards:  # the snapshot's halves, less those settled
                sh.halves = list(live[sh.path])
            self.settler.give(shards)
            newest = _newest_step(shards)
        if self.blocks is not None:
            self._hand_over(shards, self.blocks, newest)
        meta: dict[str, Any] = {}
        problems = self.problems(shards)
        if os.path.isdir(self.path):
            meta = read_run_meta(os.path.join(self.path, tf.RUN_META), problems)
        name_ray_transports(shards)  # idempotent: a kept hop is renamed once
        rec = cls(self.path, shards, meta, problems)
        if self.settler is not None and self.settler.shared:
            rec.shared_channels = sorted({*rec.shared_channels, *self.settler.shared})
        return rec

    def _hand_over(self, shards: list[Shard], blocks: StepBlocks, newest: int | None) -> None:
        """Move the folded steps past the horizon of the run's newest step into `blocks`
        (the tails forget them), and give each shard its blocks' records in their place."""
        stepped = [st.step for sh in shards for st in sh.seam_steps if st.step is not None]
        if stepped and newest is not None:
            before = blocks.before(newest)
            if min(stepped) < before:
                old = [st for sh in shards for st in sh.seam_steps
                       if st.step is not None and st.step < before]
                blocks.add(old, (h for sh in shards for h in sh.hops))
                for t in self.tails.values():
                    t.retire(before)
                for sh in shards:
                    sh.seam_steps = [st for st in sh.seam_steps
                                     if st.step is None or st.step >= before]
                if self.settler is not None:
                    self.settler.retire(before)
        if not blocks.blocks or not shards:
            return
        by_pid = {sh.pid: sh for sh in shards}
        for st in blocks.records():
            by_pid.get(st.pid, shards[0]).seam_steps.append(st)


def _newest_step(shards: list[Shard]) -> int | None:
    """The run's newest step so far: of its folded and kept hops, and of its sends."""
    newest = None
    for sh in shards:
        for step in (*(st.step for st in sh.seam_steps), *(h.step for h in sh.hops),
                     *(h.hop.step for h in sh.halves if isinstance(h, SendHalf)),
                     *(h.seam_step.step for h in sh.halves if isinstance(h, SendFold))):
            if step is not None and (newest is None or step > newest):
                newest = step
    return newest
