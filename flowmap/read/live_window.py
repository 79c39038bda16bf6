"""A live watch's detail window over a shard's kept hops: the reader's, made smaller.

A watch's reader keeps `flowmap report`'s window, so that the run's end is a snapshot
of what it holds, not a second read of the run. Each frame while the run goes reads a
smaller window (docs/live.md): every kept hop is read again at each update, so the
window is as much of an update's cost as seams x steps are. The frame's window is the
first `keep` hops of each process, by the reader's own rule
(`flowmap.read.fold.past_window`); the kept hops past it are folded here once each,
as they come, into records per seam and step: an update pays for its new hops only.
The larger window's kept hops are also indexed by step (`StepIndex`) until their step
goes to the blocks, which read each old step's kept hops for its largest bytes and hops.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import chain

from flowmap.read.events import Hop, Shard
from flowmap.read.fold import Cut, SeamStepFolder, past_window, same_leaves
from flowmap.read.reader import ShardFeed


class LiveWindow:
    """One shard's frame window: the hops it keeps, where it ended, and the rest folded."""

    __slots__ = ("keep", "feed", "hops", "cut", "folder", "seen", "steps")

    def __init__(self, keep: int, feed: ShardFeed) -> None:
        self.keep, self.feed = keep, feed
        self.hops: list[Hop] = []  # the reader's kept hops inside this window
        self.cut: Cut | None = None
        self.folder = SeamStepFolder(feed.shard.pid)  # the reader's kept hops past it
        self.seen = 0  # the reader's kept hops followed so far
        self.steps = StepIndex()  # the reader's kept hops of steps not yet in blocks

    def follow(self) -> None:
        """Take the reader's kept hops that came since the last call (it only appends)."""
        kept = self.feed.shard.hops
        new = kept[self.seen:]  # (a slice: what came since, not a walk from the start)
        for h in new:
            if self._past(h):
                self.folder.add_hop(h)
            else:
                self.hops.append(h)
        self.steps.add(new)
        self.seen = len(kept)

    def _past(self, h: Hop) -> bool:
        if len(self.hops) < self.keep:
            return False
        if self.cut is None:  # the budget ran out here: this hop's step ends the window
            self.cut = Cut(h.step, h.t_ns)
            return False
        return past_window(self.cut, h.step, h.t_ns, len(self.hops), self.keep)

    def snapshot(self) -> Shard:
        """The shard as a reader of this window reads the bytes followed so far."""
        sh = self.feed.snapshot(hops=self.hops)
        if self.cut is not None:
            sh.seam_steps += self.folder.seam_steps(str, same_leaves)
            cut = self.cut.earlier(None if sh.fold_cut is None else Cut(*sh.fold_cut))
            sh.fold_cut = (cut.step, cut.t_ns)
        return sh

    def old(self, before: int) -> Shard:
        """The reader's whole snapshot, with only its kept hops of the steps below `before`:
        what handing those steps to blocks reads."""
        return self.feed.snapshot(hops=self.steps.before(before))

    def retire(self, before: int) -> None:
        """Forget the folded steps below `before` (a watch's blocks hold them now)."""
        self.folder.cells = {k: c for k, c in self.folder.cells.items()
                             if k[3] is None or k[3] >= before}
        self.steps.retire(before)


class StepIndex:
    """Kept hops by step, for the steps not yet handed to blocks: what `StepBlocks.take`
    reads of them, without going through every kept hop at each take."""

    __slots__ = ("by_step",)

    def __init__(self) -> None:
        self.by_step: defaultdict[int, list[Hop]] = defaultdict(list)

    def add(self, hops: Iterable[Hop]) -> None:
        by_step = self.by_step
        for h in hops:
            if h.step is not None:
                by_step[h.step].append(h)

    def before(self, before: int) -> list[Hop]:
        """The hops of steps below `before`."""
        return list(chain.from_iterable(hs for s, hs in self.by_step.items() if s < before))

    def retire(self, before: int) -> None:
        for s in [s for s in self.by_step if s < before]:
            del self.by_step[s]
