"""Who wrote a storage in place, seen from the stages' own blocks.

A storage whose version counter moved between two hops holds new data, and the stage
that wrote it made it (`flowmap.writer.storage_table`). Which stages ran between the
two hops says little: a loader that prefetches the next batch while the normaliser
rewrites this one in place ran too. Each stage's block (an owner block, a seam's body)
reads, as it starts and as it ends, the counters of the storages that stage holds
(was handed, or sent): a counter that moved while the block ran was moved by its code,
and one that did not was not. Only a block that ran alone says so: while another
block started inside it, or another thread's block was open, or a thread that runs in no
block hopped (`StorageTable.acted`), the move is anyone's.

Cost: two counter reads per held storage per block, at most `MAX_WATCHED` storages a
stage, the latest handed (docs/performance.md). Nothing is read for a stage that holds
no tensor.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable, Sequence
from typing import Any

from flowmap.writer.storage_refs import base_getter, storage_of, versions_of

MAX_WATCHED = 32  # storages a stage holds whose counters its blocks read, the latest handed
MAX_STAGES = 4096  # stages watched at most (owners are few; bounded all the same)

# The fields a storage's `versions` entry gains here (`StorageTable.versions`).
WROTE = 4  # (stage, the counter its block left): the latest write a block saw
CLEARED = 5  # stages whose blocks ran since the last hop and saw no write


class BlockToken:
    """What a block's start noted, for its end."""

    __slots__ = ("since", "block", "acts", "alone", "before")

    def __init__(self, since: int, block: int, acts: int, alone: bool,
                 before: dict[Hashable, int]) -> None:
        self.since = since  # the number of the next hop as the block started
        self.block = block  # blocks started in this process before this one, and it
        self.acts = acts  # hops by code in no block, as it started (`acts`)
        self.alone = alone  # no other thread's block was open as it started
        self.before = before  # key -> the counter of each storage watched, as it started


class BlockWrites:
    """The storages each stage holds, and what its blocks saw of their counters."""

    def __init__(self) -> None:
        self.watched: dict[str, dict[Hashable, weakref.ref[Any]]] = {}
        self.blocks = 0  # blocks started in this process
        self.open: dict[int, int] = {}  # thread -> its blocks open
        self.acts = 0  # hops by code that ran in no block (a `set_owner` thread's loop)
        self.unseen: dict[Hashable, Stepped] = {}  # stepped before any hop (`stepped`)

    def stepped(self, versions: dict[Hashable, list[Any]], owner: str,
                keys: Sequence[Hashable], holders: Sequence[Any]) -> None:
        """`stepped`, noting here the parameters no hop carried yet."""
        stepped(versions, owner, keys, holders, self.unseen)

    def made(self, versions: dict[Hashable, list[Any]], owner: str, keys: Sequence[Hashable],
             holders: Sequence[Any]) -> None:
        """What `owner`'s decorated function returned (or its generator yielded): each
        tensor no hop carried yet is its making, until a hop does (`stepped_first`): the
        loader whose prompts the driver hands on. An inner stage's making, returned on
        unchanged by an outer one, stays the inner's."""
        for key, holder, version in zip(keys, holders, versions_of(holders), strict=False):
            storage = storage_of(holder)
            if version is None or key in versions or storage is None:
                continue  # hopped before: its maker is known
            got = self.unseen.get(key)
            if got is not None and got[1] == version and got[2]() is storage:
                continue
            if len(self.unseen) >= MAX_UNSEEN:
                self.unseen.clear()
            self.unseen[key] = (owner, version, weakref.ref(storage))

    def stepped_first(self, key: Hashable, version: int, holder: Any) -> str | None:
        """`stepped_first`, of the parameters noted here."""
        return stepped_first(self.unseen, key, version, holder)

    def hold(self, stage: str | None, key: Hashable, holder: Any) -> None:
        """`stage` has the tensor `holder` (storage `key`): its blocks read its counter."""
        if stage is None:
            return
        keys = self.watched.get(stage)
        if keys is None:
            if len(self.watched) >= MAX_STAGES:
                self.watched.clear()
            keys = self.watched[stage] = {}
        elif key in keys:
            del keys[key]  # to the end: the latest handed are kept
        elif len(keys) >= MAX_WATCHED:
            dead = [k for k, ref in keys.items() if ref() is None]
            for k in dead or list(keys)[:1]:
                del keys[k]
        try:
            base = base_getter(type(holder))  # a view dies first; its base shares its counter
            owner = base.__get__(holder, type(holder)) if base is not None else None
            keys[key] = weakref.ref(holder if owner is None else owner)
        except Exception:  # not weakly referable: not watched
            pass

    def rekey(self, old: Hashable, new: Hashable) -> None:
        """The storage watched at `old` is at `new` now (moved into shared memory)."""
        for keys in self.watched.values():
            if old in keys:
                keys[new] = keys.pop(old)

    def starts(self, stage: str, since: int) -> BlockToken:
        """`stage`'s block starts, before the hop numbered `since`."""
        me = threading.get_ident()
        open_ = self.open
        alone = len(open_) == 0 or (len(open_) == 1 and me in open_)
        open_[me] = open_.get(me, 0) + 1
        self.blocks += 1
        keys = self.watched.get(stage)
        before: dict[Hashable, int] = {}
        if keys:
            items = list(keys.items())
            for (key, _), version in zip(items, versions_of([ref() for _, ref in items]),
                                         strict=False):
                if version is not None:
                    before[key] = version
        return BlockToken(since, self.blocks, self.acts, alone, before)

    def ends(self, stage: str, token: BlockToken, versions: dict[Hashable, list[Any]]) -> None:
        """`stage`'s block ends: what it wrote of what it holds, and what it did not, go on
        the storages' `versions` entries, if it ran alone."""
        me = threading.get_ident()
        open_ = self.open
        left = open_.get(me, 1) - 1
        if left > 0:
            open_[me] = left
        else:
            open_.pop(me, None)
        if (not token.alone or self.blocks != token.block or self.acts != token.acts
                or len(open_) > (me in open_)):
            return  # a block inside it, or another thread's code beside it: not its alone
        keys = self.watched.get(stage)
        if not keys:
            return
        items = list(keys.items())
        now = versions_of([ref() for _, ref in items])
        for (key, _), version in zip(items, now, strict=False):
            entry = versions.get(key)
            if version is None or entry is None:
                continue
            # handed during the block: from that hop; else from the block's start
            base = entry[0] if entry[1] >= token.since else token.before.get(key)
            if base is None:
                continue
            if version != base:
                entry[WROTE] = (stage, version)
            elif stage not in entry[CLEARED]:
                entry[CLEARED] += (stage,)


def stepped(versions: dict[Hashable, list[Any]], owner: str, keys: Sequence[Hashable],
            holders: Sequence[Any], unseen: dict[Hashable, Stepped]) -> None:
    """An optimizer's step, run by `owner`'s code, wrote `holders` (its parameters, at
    `keys`) in place: each one hopped before, and moved since, is `owner`'s (a trainer
    steps the weights the rollout hands on; it was never handed them). A write seen, as a
    block's (`WROTE`). One never hopped is noted in `unseen` (`stepped_first`)."""
    for i, (key, version) in enumerate(zip(keys, versions_of(holders), strict=False)):
        entry = versions.get(key)
        if entry is not None and version is not None and entry[0] != version:
            entry[WROTE] = (owner, version)
        elif entry is None and version is not None:
            storage = storage_of(holders[i])
            if storage is not None:
                if len(unseen) >= MAX_UNSEEN:
                    unseen.clear()
                unseen[key] = (owner, version, weakref.ref(storage))


Stepped = tuple[str, int, "weakref.ref[Any]"]  # (who stepped it, its counter then, its storage)
MAX_UNSEEN = 4096  # parameters stepped before any hop carried them, kept at most


def stepped_first(unseen: dict[Hashable, Stepped], key: Hashable, version: int,
                  holder: Any) -> str | None:
    """Who stepped the storage at `key`, hopped now for the first time, where nothing
    wrote it since (its counter is the step's) and it is that very storage: the first
    weights a driver syncs are the trainer's that stepped them, not the driver's."""
    got = unseen.pop(key, None)
    if got is None or got[1] != version:
        return None
    storage = storage_of(holder)
    return got[0] if storage is not None and got[2]() is storage else None


def writer_of(last: list[Any], src: str | None, version: int,
              ran: dict[str, tuple[int, int]], blockless: set[str]) -> str | None:
    """Who wrote a storage in place since its last hop (its counter is at `version` now;
    `last`, its `versions` entry). The stage whose block was seen to leave it so (`WROTE`);
    else, among the stages whose code ran since (`ran`: stage -> the hops as it started and
    ended) and had it, less those whose blocks saw no write: those that started since
    first (the stage whose block sent the last hop ran on only to its end). The hop's
    sender `src`, if it was handed it (a coroutine that scales what it got, then puts it
    on), unless one thread that runs in no block (`blockless`) was handed it too (an
    engine's loop fills the buffer the driver put on its queue, and the driver hands it
    on); else the stage that made it (weights the trainer steps again after handing them
    to the rollout); else the one stage it was handed to (advantages normalised by the
    stage given the scores). None where that does not decide, or no stage that had it
    ran (code of no named stage wrote it): the hop's sender is taken then."""
    wrote: tuple[str, int] | None = last[WROTE]
    if wrote is not None and wrote[1] == version:
        return wrote[0]
    since: int = last[1]
    held: tuple[str | None, ...] = last[2]
    maker: str | None = last[3]
    cleared: tuple[str, ...] = last[CLEARED]
    runs = [run for run in ran.items() if run[0] not in cleared]  # a copy: threads
    after = [s for s, (_, end) in runs if end > since]
    started = [s for s, (start, end) in runs if start > since and end > since]
    for stages in (started, after):
        holding = [s for s in stages if s in held]
        if src in holding:  # the stage acting on it now, which was handed it; unless a
            # thread that runs in no block (an engine's loop) was handed it too and ran
            engines = [s for s in holding if s != src and s in blockless]
            return engines[0] if len(engines) == 1 else src
        if maker in stages:
            return maker
        if len(holding) == 1:
            return holding[0]
        if holding:  # several had it and ran, the sender none of them
            return None
    return None
