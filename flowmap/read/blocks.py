"""Hold a long run's old steps in blocks, so what a live watch holds does not grow with the run.

A watch rebuilds the model from every record at each update, and folded steps
(`SeamStep`: one per seam, step and process) pile up for as long as the run goes:
a run of 4 seams at 2.5 steps a second makes 6,000 in 10 minutes and 860,000 in
a day, each read again at every update. So the incremental reader keeps the
newest `HORIZON_STEPS` steps one by one and hands older ones here as they pass
the horizon, into blocks of `width` consecutive steps (the newest block fills as
they come). A block keeps one record per seam, process and transport: hops,
bytes, items, least and largest hop, first and last time add up over steps, so
they stay exact. What a block cannot hold, its steps
one by one, it keeps as the figures the model reads per step (`StepBlock`):
which steps it holds, and each step's largest bytes and hops, for the seam and
for the run, taken from the steps' own sums before they were merged (kept hops
included). Past `MAX_BLOCKS` blocks, neighbours merge and the width doubles, so
a watch holds at most `HORIZON_STEPS + MAX_BLOCKS` records per seam, process and
transport, however long the run.

Not exact: hops of a step that come after its block was made (a process lagging
more than the horizon behind) join the block's sums exactly, but count on their
own in its largest step (a lower bound there). Step bins count a block in the
bin of its first step. `flowmap report` never holds blocks, and a watch's last
frame, once the program has ended, is read as `report` reads it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from flowmap.read.events import Hop, SeamStep, StepBlock
from flowmap.read.fold import merge_seam_steps

HORIZON_STEPS = 64  # the newest steps a live watch keeps one record per seam, step and process
MAX_BLOCKS = 64  # older steps are held in at most this many blocks of equal width

_Key = tuple[str, str, str, int, str]  # src, dst, name, pid, transport
_Seam = tuple[str, str, str]


class _Block:
    """One block's merged records, its steps, and its per-step maxima."""

    __slots__ = ("steps", "merged", "seam_max", "run_max", "made")

    def __init__(self) -> None:
        self.steps: list[tuple[int, int]] = []  # disjoint ranges, ascending
        self.merged: dict[_Key, SeamStep] = {}  # without their `block`
        self.seam_max: dict[_Seam, tuple[int, int]] = {}  # seam -> (bytes, hops) of its largest step
        self.run_max = 0  # the run's largest step, every seam together
        self.made: list[SeamStep] | None = None  # the records as handed out, until changed

    def absorb(self, other: _Block) -> None:
        """Take `other`'s steps, records and maxima in (a neighbour, as the width doubles)."""
        self.steps = _union(self.steps, other.steps)
        for key, st in other.merged.items():
            got = self.merged.get(key)
            self.merged[key] = st if got is None else merge_seam_steps(got, st)
        for seam, (b, k) in other.seam_max.items():
            got_b, got_k = self.seam_max.get(seam, (0, 0))
            self.seam_max[seam] = (max(got_b, b), max(got_k, k))
        self.run_max = max(self.run_max, other.run_max)
        self.made = None

    def records(self) -> list[SeamStep]:
        if self.made is None:
            steps = tuple(self.steps)
            first = steps[0][0]
            by_seam = {seam: StepBlock(steps, b, k, self.run_max)
                       for seam, (b, k) in self.seam_max.items()}
            self.made = [_with_block(st, first, by_seam[(st.src, st.dst, st.name)])
                         for st in self.merged.values()]
        return self.made


class StepBlocks:
    """A watch's old steps: blocks of `width` consecutive steps, at most `max_blocks` of them."""

    def __init__(self, horizon: int = HORIZON_STEPS, max_blocks: int = MAX_BLOCKS) -> None:
        if horizon < 1 or max_blocks < 2:
            raise ValueError("a horizon of at least 1 step and at least 2 blocks")
        self.horizon, self.max_blocks = horizon, max_blocks
        self.width = 1
        self.blocks: dict[int, _Block] = {}  # step // width -> its block

    def before(self, newest: int) -> int:
        """Steps below this are to be handed over: past the horizon of `newest`."""
        return newest - self.horizon + 1

    def add(self, old: Sequence[SeamStep], kept: Iterable[Hop]) -> None:
        """Take in `old` (records of steps below `before`, none of them a block's: a step
        already in a block comes back only for hops that came since) and, for
        each step's largest bytes and hops, the kept hops of their steps (`kept`, any)."""
        by_block: dict[int, list[SeamStep]] = defaultdict(list)
        for st in old:
            by_block[st.step // self.width].append(st)  # type: ignore[operator]  # stepped
        steps = {st.step for st in old}
        seam_sums: dict[tuple[_Seam, int], list[int]] = {}  # (seam, step) -> [bytes, hops]
        run_sums: dict[int, int] = defaultdict(int)
        for st in old:
            got = seam_sums.setdefault(((st.src, st.dst, st.name), st.step), [0, 0])  # type: ignore[arg-type]
            got[0] += st.nbytes_sum
            got[1] += st.hops
            run_sums[st.step] += st.nbytes_sum  # type: ignore[index]
        for h in kept:
            step = h.step
            if step is not None and step in steps:
                got = seam_sums.setdefault(((h.src, h.dst, h.name), step), [0, 0])
                got[0] += h.nbytes
                got[1] += 1
                run_sums[step] += h.nbytes
        for b, records in by_block.items():
            blk = self.blocks.get(b)
            if blk is None:
                blk = self.blocks[b] = _Block()
            blk.steps = _union(blk.steps, [(st.step, st.step) for st in records])  # type: ignore[misc]
            for st in records:
                key = (st.src, st.dst, st.name, st.pid, st.transport)
                got_st = blk.merged.get(key)
                blk.merged[key] = st if got_st is None else merge_seam_steps(got_st, st)
            blk.made = None
        for (seam, step), (nbytes, hops) in seam_sums.items():
            blk = self.blocks[step // self.width]
            got_b, got_k = blk.seam_max.get(seam, (0, 0))
            blk.seam_max[seam] = (max(got_b, nbytes), max(got_k, hops))
        for step, nbytes in run_sums.items():
            blk = self.blocks[step // self.width]
            blk.run_max = max(blk.run_max, nbytes)
        while len(self.blocks) > self.max_blocks:
            self._coarsen()

    def _coarsen(self) -> None:
        """Twice the width: each pair of neighbours becomes one block."""
        self.width *= 2
        blocks: dict[int, _Block] = {}
        for b in sorted(self.blocks):
            into = blocks.get(b // 2)
            if into is None:
                blocks[b // 2] = self.blocks[b]
                self.blocks[b].made = None
            else:
                into.absorb(self.blocks[b])
        self.blocks = blocks

    def records(self) -> list[SeamStep]:
        """Every block's records, each with its `StepBlock` (`step`: the block's first)."""
        out: list[SeamStep] = []
        for b in sorted(self.blocks):
            out += self.blocks[b].records()
        return out


def _with_block(st: SeamStep, first: int, block: StepBlock) -> SeamStep:
    return SeamStep(st.t_ns, st.t_first_ns, st.pid, st.src, st.dst, st.name, first, st.transport,
                    st.hops, st.nbytes_sum, st.nbytes_min, st.nbytes_max, st.wire_bytes_sum,
                    st.num_items, st.version_min, st.version_max, st.leaves, block)


def _union(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Two sets of ranges as one, ascending, touching ranges joined."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted([*a, *b]):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out
