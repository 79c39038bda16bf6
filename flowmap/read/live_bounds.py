"""What a live watch holds beyond the one reader's records, so that it stays bounded.

`flowmap.load` reads a run once and holds every step and transport half; a watch
follows a run for days (docs/live.md, "The incremental reader"). So its halves are
joined once (`flowmap.read.settle`), its old steps go to blocks (`flowmap.read.blocks`),
and its frames read a smaller detail window than the report's
(`flowmap.read.live_window`), while the reader keeps the report's: the run's end is a
snapshot of that (`whole`), with blocks of its own, not a second read of the run.
"""

from __future__ import annotations

from itertools import chain

from flowmap.read.blocks import StepBlocks
from flowmap.read.events import SendFold, SendHalf, Shard
from flowmap.read.fold import shard_budget
from flowmap.read.live_window import LiveWindow
from flowmap.read.ray_transport import name_ray_transports
from flowmap.read.settle import HalfSettler, give_records
from flowmap.read.tail import ShardTail


class LiveBounds:
    """A watch's blocks, settler and frame windows, applied to each snapshot of its reader."""

    def __init__(self, blocks: StepBlocks, settler: HalfSettler,
                 live_hops: int | None = None) -> None:
        self.blocks = blocks  # the old steps of what frames read
        self.settler = settler
        self.live_hops = live_hops  # frames' window (None: the reader's own)
        self.whole_blocks = None if live_hops is None else StepBlocks(blocks.horizon,
                                                                      blocks.max_blocks)
        self.windows: dict[str, LiveWindow] = {}
        self.budgets: dict[str, int] = {}  # each shard's frame window, set as its tail opens

    def opened(self, path: str, num_shards: int) -> None:
        """A shard's tail was opened among `num_shards`: its frames' share of the window."""
        if self.live_hops is not None:
            self.budgets[path] = shard_budget(self.live_hops, num_shards) or 0

    def snapshot(self, tails: dict[str, ShardTail], whole: bool) -> list[Shard]:
        """The shards as read so far, bounded: in the frames' window unless `whole`."""
        if self.live_hops is not None:  # what the frames' window folds is renamed first
            name_ray_transports([sh for t in tails.values() if (sh := t.shard) is not None])
            for path, t in tails.items():
                w = self.windows.get(path)
                if t.feed is not None and (w is None or w.feed is not t.feed):  # (a new one)
                    w = self.windows[path] = LiveWindow(self.budgets[path], t.feed)
                if w is not None:
                    w.follow()
        whole = whole or self.live_hops is None
        shards = self._shards(tails, whole)
        self._bound(tails, shards, whole)
        return shards

    def _shards(self, tails: dict[str, ShardTail], whole: bool) -> list[Shard]:
        """Each shard's snapshot: whole, or in the frames' window."""
        windows = {} if whole else self.windows
        return [sh for p in sorted(tails)
                if (sh := w.snapshot() if (w := windows.get(p)) else tails[p].snapshot())]

    def _bound(self, tails: dict[str, ShardTail], shards: list[Shard], whole: bool) -> None:
        """Settle the halves whose join is settled, then move the folded steps past the horizon
        of the run's newest step into blocks (the tails, windows and settler forget them),
        and give the snapshot's `shards` what they hold instead."""
        settler, blocks = self.settler, self.blocks
        newest = _newest_step(shards)
        live = {t.path: t.shard.halves for t in tails.values() if t.shard is not None}
        settler.settle(list(live.values()), None if newest is None else blocks.before(newest))
        for sh in shards:  # the snapshot's halves, less those settled
            sh.halves = list(live[sh.path])
        settler.give(shards, whole)
        newest = _newest_step(shards)
        if newest is not None and self._take(tails, shards, whole, before := blocks.before(newest)):
            for t in tails.values():
                t.retire(before)
            for w in self.windows.values():
                w.retire(before)
            settler.retire(before)
        own = self.whole_blocks if whole and self.whole_blocks is not None else blocks
        give_records(shards, (), own.records())

    def _take(self, tails: dict[str, ShardTail], shards: list[Shard], whole: bool,
              before: int) -> bool:
        """Move the snapshot's folded steps below `before` into its blocks and, where frames
        read a window of their own, the other view's into the other blocks (what the tails
        and the settler forget is both's); whether there were any."""
        settler, whole_blocks = self.settler, self.whole_blocks
        if whole_blocks is None:
            return self.blocks.take(shards, before)
        if whole:
            frames = self._shards(tails, False)
            give_records(frames, *settler.records(False))
            whole_blocks.take(shards, before)
            return self.blocks.take(frames, before)
        if not self.blocks.take(shards, before):
            return False  # the whole view's folded records are among the frames'
        old = [sh for p in sorted(tails)
               if (sh := w.old(before) if (w := self.windows.get(p)) else tails[p].snapshot())]
        give_records(old, settler.by_step.before(before), settler.records(True)[1])
        whole_blocks.take(old, before)
        return True


def _newest_step(shards: list[Shard]) -> int | None:
    """The run's newest step so far: of its folded and kept hops, and of its sends."""
    sends = (h.step for sh in shards for h in sh.halves if isinstance(h, (SendHalf, SendFold)))
    steps = chain((st.step for sh in shards for st in sh.seam_steps),
                  (h.step for sh in shards for h in sh.hops), sends)
    return max((step for step in steps if step is not None), default=None)

