"""Hold a long run's old steps in blocks, so what a live watch holds does not grow with the run.

Folded steps (one record per seam, step and process) pile up for as long as a run
goes, each read again at every update. So a watch keeps the newest `HORIZON_STEPS`
steps one by one and hands older ones here, into blocks of `width` consecutive steps:
one record per seam, process and transport (what adds up over steps stays exact), and
the figures read per step that a merged record cannot give (`StepBlock`). How that
bounds a watch, and where it is not exact, is in docs/live.md ("nothing grows per step").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from itertools import chain

from flowmap.read.events import SeamStep, Shard, StepBlock
from flowmap.read.fold import merge_seam_steps

HORIZON_STEPS = 64  # the newest steps a live watch keeps one record per seam, step and process
MAX_BLOCKS = 64  # older steps are held in at most this many blocks of equal width

_Seam = tuple[str, str, str] | None  # None: every seam of the run together


class _Block:
    """One block's merged records, its steps, and its per-step maxima."""

    __slots__ = ("steps", "merged", "most", "made")

    def __init__(self) -> None:
        self.steps: list[tuple[int, int]] = []  # disjoint ranges, ascending
        self.merged: dict[tuple[str, str, str, int, str], SeamStep] = {}  # without their `block`
        self.most: dict[_Seam, tuple[int, int]] = {}  # seam -> (bytes, hops) of its largest step
        self.made: list[SeamStep] | None = None  # the records as handed out, until changed

    def absorb(self, other: _Block) -> None:
        """Take `other`'s steps, records and maxima in (new steps, or a neighbour's)."""
        self.steps = _union(self.steps, other.steps)
        for st in other.merged.values():
            self.put(st)
        for seam, (nbytes, hops) in other.most.items():
            self.note(seam, nbytes, hops)
        self.made = None

    def put(self, st: SeamStep) -> None:
        got = self.merged.get(key := (st.src, st.dst, st.name, st.pid, st.transport))
        self.merged[key] = st if got is None else merge_seam_steps(got, st)

    def note(self, seam: _Seam, nbytes: int, hops: int) -> None:
        got_bytes, got_hops = self.most.get(seam, (0, 0))
        self.most[seam] = (max(got_bytes, nbytes), max(got_hops, hops))

    def records(self) -> list[SeamStep]:
        if self.made is None:
            steps, run = tuple(self.steps), self.most.get(None, (0, 0))[0]
            by_seam = {seam: StepBlock(steps, b, k, run) for seam, (b, k) in self.most.items()}
            self.made = [replace(st, step=steps[0][0], block=by_seam[st.seam])
                         for st in self.merged.values()]
        return self.made


class StepBlocks:
    """A watch's old steps: blocks of `width` consecutive steps, at most `max_blocks` of them."""

    def __init__(self, horizon: int = HORIZON_STEPS, max_blocks: int = MAX_BLOCKS) -> None:
        if horizon < 1 or max_blocks < 2:
            raise ValueError("a horizon of at least 1 step and at least 2 blocks")
        self.horizon, self.max_blocks, self.width = horizon, max_blocks, 1
        self.blocks: dict[int, _Block] = {}  # step // width -> its block

    def before(self, newest: int) -> int:
        """Steps below this are to be handed over: past the horizon of `newest`."""
        return newest - self.horizon + 1

    def take(self, shards: list[Shard], before: int) -> bool:
        """Take the shards' folded steps below `before` out of them (a step already in a block
        comes back only for hops that came since), with, for each step's largest bytes and
        hops, their kept hops; whether there were any."""
        old = [st for sh in shards for st in sh.seam_steps if st.step is not None and st.step < before]
        if not old:
            return False
        for sh in shards:
            sh.seam_steps = [st for st in sh.seam_steps if st.step is None or st.step >= before]
        new: dict[int, _Block] = defaultdict(_Block)
        for st in old:
            blk = new[st.step // self.width]  # type: ignore[operator]  # stepped
            blk.steps.append((st.step, st.step))  # type: ignore[arg-type]
            blk.put(st)
        for (seam, step), (nbytes, hops) in _step_sums(old, shards).items():
            new[step // self.width].note(seam, nbytes, hops)
        for b, blk in new.items():
            self.blocks.setdefault(b, _Block()).absorb(blk)
        while len(self.blocks) > self.max_blocks:
            self._coarsen()
        return True

    def _coarsen(self) -> None:
        """Twice the width: each pair of neighbours becomes one block."""
        self.width *= 2
        blocks: dict[int, _Block] = {}
        for b in sorted(self.blocks):
            blocks.setdefault(b // 2, _Block()).absorb(self.blocks[b])
        self.blocks = blocks

    def records(self) -> list[SeamStep]:
        """Every block's records, each with its `StepBlock` (`step`: the block's first)."""
        return [st for b in sorted(self.blocks) for st in self.blocks[b].records()]


def _step_sums(old: list[SeamStep], shards: list[Shard]) -> dict[tuple[_Seam, int], list[int]]:
    """Each step's bytes and hops of `old`, per seam and for the run (None), from the steps'
    own records and the shards' kept hops of those steps."""
    steps = {st.step for st in old}
    sums: dict[tuple[_Seam, int], list[int]] = defaultdict(lambda: [0, 0])
    for seam, step, nbytes, hops in chain(
            ((st.seam, st.step, st.nbytes_sum, st.hops) for st in old),
            ((h.seam, h.step, h.nbytes, 1) for sh in shards for h in sh.hops if h.step in steps)):
        for got in (sums[(seam, step)], sums[(None, step)]):  # type: ignore[index]  # stepped
            got[0] += nbytes
            got[1] += hops
    return sums


def _union(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Two sets of ranges as one, ascending, touching ranges joined."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted([*a, *b]):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out
