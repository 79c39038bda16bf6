"""Per-step figures: bins of consecutive steps (for charts) and run-wide step totals.

A chart of a 10,000-step run cannot show every step, so steps are grouped
into at most `max_bins` bins of consecutive steps; the caller picks the bound
(the HTML page keeps seams x bins under a budget), the model does the
counting. A hop without a step belongs to the last step seen before it (in
time), or to the first bin when none was. A folded step (`SeamStep`) counts
in its step's bin, or, without a step, where its last hop was.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, compress, groupby, repeat
from operator import add, attrgetter, is_not, itemgetter, not_, sub

from flowmap.gc_pause import paused_gc
from flowmap.model.memo import HopsMemo, PrefixMemo
from flowmap.model.sources import StepSource
from flowmap.model.types import SeamKey, SeamStats, StepBin, StepBins, Totals
from flowmap.read.events import Hop, SeamStep
from flowmap.read.records import Events


def step_bins(run: StepSource, seams: list[SeamKey], max_bins: int,
              memo: StepMemo | None = None) -> StepBins:
    """Bytes and hops of each of `seams` (every seam of the run) per bin of consecutive steps.

    `memo` (a live watch's, across its rebuilds): folded steps that did not change since
    the last call are not read again; the bins are those counted without it.
    """
    with paused_gc():
        return _bins(run, seams, max_bins, memo)


@dataclass(slots=True, frozen=True)
class _StepSums:
    """A run of folded steps per seam and step (bytes, hops) and per step (its first and
    last hop's time): two adjacent runs of them add up."""

    nbytes: dict[SeamKey, dict[int | None, int]]
    hops: dict[SeamKey, dict[int | None, int]]
    t_lo: dict[int | None, int]
    t_hi: dict[int | None, int]

    def plus(self, later: _StepSums) -> _StepSums:
        """This run followed by `later` (neither is changed)."""
        if not later.t_lo:
            return self
        if not self.t_lo:
            return later
        nbytes, hops = dict(self.nbytes), dict(self.hops)
        for mine, theirs in ((nbytes, later.nbytes), (hops, later.hops)):
            for key, per_step in theirs.items():
                got = mine.get(key)
                if got is None:
                    mine[key] = per_step
                    continue
                got = mine[key] = dict(got)
                for step, v in per_step.items():
                    got[step] = got.get(step, 0) + v
        t_lo, t_hi = dict(self.t_lo), dict(self.t_hi)
        for step, t in later.t_lo.items():
            if t < t_lo.get(step, t + 1):
                t_lo[step] = t
        for step, t in later.t_hi.items():
            if t > t_hi.get(step, t - 1):
                t_hi[step] = t
        return _StepSums(nbytes, hops, t_lo, t_hi)


def _step_sums(folded: Sequence[SeamStep]) -> _StepSums:
    out = _StepSums({}, {}, {}, {})
    for st in folded:
        key, step = (st.src, st.dst, st.name), st.step
        per_step = out.nbytes.setdefault(key, {})
        per_step[step] = per_step.get(step, 0) + st.nbytes_sum
        per_step = out.hops.setdefault(key, {})
        per_step[step] = per_step.get(step, 0) + st.hops
        if st.t_first_ns < out.t_lo.get(step, st.t_first_ns + 1):
            out.t_lo[step] = st.t_first_ns
        if st.t_ns > out.t_hi.get(step, st.t_ns - 1):
            out.t_hi[step] = st.t_ns
    return out


def _hop_sums(hops: Sequence[Hop]) -> _StepSums:
    """`_step_sums` of kept hops (each with its step)."""
    out = _StepSums({}, {}, {}, {})
    for h in hops:
        key, step, t = (h.src, h.dst, h.name), h.step, h.t_ns
        per_step = out.nbytes.setdefault(key, {})
        per_step[step] = per_step.get(step, 0) + h.nbytes
        per_step = out.hops.setdefault(key, {})
        per_step[step] = per_step.get(step, 0) + 1
        if t < out.t_lo.get(step, t + 1):
            out.t_lo[step] = t
        if t > out.t_hi.get(step, t - 1):
            out.t_hi[step] = t
    return out


class StepMemo(PrefixMemo[None, _StepSums]):
    """The per-step sums of a run's folded steps that did not change since the last call of
    `step_bins` (`flowmap.model.memo`): a live watch's rebuild reads only the rest. And of
    its kept hops, which stop changing once the detail window is full."""

    def __init__(self) -> None:
        super().__init__(_step_sums, _StepSums.plus, _StepSums({}, {}, {}, {}))
        # the sums of the kept hops, while they stay the same
        self.kept: HopsMemo[_StepSums] = HopsMemo(_hop_sums)


def _bins(run: StepSource, seams: list[SeamKey], max_bins: int,
          memo: StepMemo | None = None) -> StepBins:
    steps = run.steps
    nbins = max(1, min(len(steps), max_bins))
    bin_of = {st: i * nbins // len(steps) for i, st in enumerate(steps)}
    index = {key: n for n, key in enumerate(seams)}
    byte_rows = [[0] * nbins for _ in index]
    hop_rows = [[0] * nbins for _ in index]
    t_lo = [math.inf] * nbins
    t_hi = [-math.inf] * nbins
    events = run.events
    hops, folded = events.hops, events.seam_steps
    loose = _Loose(hops, folded)
    if loose.any:  # records without a step: each in the bin of the last step before it
        hops, folded = loose.stepped_hops, loose.stepped_folded
        for rec, b in loose.placed(bin_of):
            n = index[(rec.src, rec.dst, rec.name)]
            if isinstance(rec, SeamStep):
                byte_rows[n][b] += rec.nbytes_sum
                hop_rows[n][b] += rec.hops
                t_first = rec.t_first_ns
            else:
                byte_rows[n][b] += rec.nbytes
                hop_rows[n][b] += 1
                t_first = rec.t_ns
            if t_first < t_lo[b]:
                t_lo[b] = t_first
            if rec.t_ns > t_hi[b]:
                t_hi[b] = rec.t_ns
    # every other record has its step, so its bin: the order they come in does not matter
    if memo is not None:
        sums = memo.parts({None: folded})[None].plus(memo.kept.of(hops))
        _add_sums(sums, steps, bin_of, index, byte_rows, hop_rows, t_lo, t_hi)
    else:
        _bins_by_step(hops, folded, bin_of, index, byte_rows, hop_rows, t_lo, t_hi)
    return _bins_of(run, steps, bin_of, nbins, index, byte_rows, hop_rows, t_lo, t_hi)


class _Loose:
    """The records without a step, and where each falls: in time order (hops before
    folded steps at equal times, each list in its own order), the bin of the last record
    with a step before it, or the first bin. Found by bisection over the records with a
    step (their indices and times taken out in C), so a live watch's update does not walk
    every folded step of a long run in Python, only the few records without one."""

    def __init__(self, hops: Sequence[Hop], folded: Sequence[SeamStep]) -> None:
        self.hops, self.folded = hops, folded
        hop_steps, folded_steps = list(map(_STEP, hops)), list(map(_STEP, folded))
        self.any = None in hop_steps or None in folded_steps
        if not self.any:
            return
        has_h = list(map(is_not, hop_steps, repeat(None)))
        has_f = list(map(is_not, folded_steps, repeat(None)))
        self.stepped_hops = list(compress(hops, has_h))
        self.stepped_folded = list(compress(folded, has_f))
        self._h_at = list(compress(range(len(hops)), has_h))  # indices of stepped hops
        self._f_at = list(compress(range(len(folded)), has_f))
        self._loose_h = list(compress(range(len(hops)), map(not_, has_h)))
        self._loose_f = list(compress(range(len(folded)), map(not_, has_f)))

    def placed(self, bin_of: dict[int, int]) -> Iterator[tuple[Hop | SeamStep, int]]:
        """Each record without a step, with its bin."""
        hops, folded = self.hops, self.folded
        hop_t, folded_t = list(map(_T_NS, hops)), list(map(_T_NS, folded))
        for i in self._loose_h:  # a hop: hops before it in its list, folded ones strictly earlier
            yield hops[i], self._bin(bin_of, i, bisect_left(folded_t, hop_t[i]))
        for j in self._loose_f:  # a folded step: hops at or before its time, folded before it
            yield folded[j], self._bin(bin_of, bisect_right(hop_t, folded_t[j]), j)

    def _bin(self, bin_of: dict[int, int], hops_below: int, folded_below: int) -> int:
        """The bin of the later of the last stepped hop with index < `hops_below` and the
        last stepped folded step with index < `folded_below` (0: neither)."""
        k = bisect_left(self._h_at, hops_below) - 1
        m = bisect_left(self._f_at, folded_below) - 1
        if k < 0 and m < 0:
            return 0
        last: Hop | SeamStep
        if k < 0:
            last = self.folded[self._f_at[m]]
        elif m < 0:
            last = self.hops[self._h_at[k]]
        else:  # in time order, a hop comes before a folded step of the same time
            h, f = self.hops[self._h_at[k]], self.folded[self._f_at[m]]
            last = f if f.t_ns >= h.t_ns else h
        return bin_of[last.step]  # type: ignore[index]  # stepped: its step is set


def _bins_by_step(hops: Sequence[Hop], folded: Sequence[SeamStep], bin_of: dict[int, int],
                  index: dict[SeamKey, int], byte_rows: list[list[int]],
                  hop_rows: list[list[int]], t_lo: list[float], t_hi: list[float]) -> None:
    """`_bins`' sums where every record has its step (no merge by time needed)."""
    for h in hops:
        b = bin_of[h.step]  # type: ignore[index]  # every step is set (checked by the caller)
        n = index[(h.src, h.dst, h.name)]
        byte_rows[n][b] += h.nbytes
        hop_rows[n][b] += 1
        if h.t_ns < t_lo[b]:
            t_lo[b] = h.t_ns
        if h.t_ns > t_hi[b]:
            t_hi[b] = h.t_ns
    for st in folded:
        b = bin_of[st.step]  # type: ignore[index]
        n = index[(st.src, st.dst, st.name)]
        byte_rows[n][b] += st.nbytes_sum
        hop_rows[n][b] += st.hops
        if st.t_first_ns < t_lo[b]:
            t_lo[b] = st.t_first_ns
        if st.t_ns > t_hi[b]:
            t_hi[b] = st.t_ns


def _add_sums(sums: _StepSums, steps: Sequence[int], bin_of: dict[int, int],
              index: dict[SeamKey, int], byte_rows: list[list[int]], hop_rows: list[list[int]],
              t_lo: list[float], t_hi: list[float]) -> None:
    """`_bins_by_step` of folded steps, from their per-step sums: a bin is a run of
    consecutive steps, so its sum is a difference of running sums (counted in C)."""
    nbins = len(t_lo)
    of = list(map(bin_of.__getitem__, steps))  # ascending
    starts = [bisect_left(of, b) for b in range(nbins + 1)]
    for sums_of, rows in ((sums.nbytes, byte_rows), (sums.hops, hop_rows)):
        for key, per_step in sums_of.items():
            running = list(accumulate(map(per_step.get, steps, repeat(0)), initial=0))
            at = [running[i] for i in starts]
            n = index[key]
            rows[n] = list(map(add, rows[n], map(sub, at[1:], at[:-1])))
    los = list(map(sums.t_lo.get, steps, repeat(math.inf)))
    his = list(map(sums.t_hi.get, steps, repeat(-math.inf)))
    for b in range(nbins):
        lo, hi = min(los[starts[b]:starts[b + 1]], default=math.inf), \
            max(his[starts[b]:starts[b + 1]], default=-math.inf)
        if lo < t_lo[b]:
            t_lo[b] = lo
        if hi > t_hi[b]:
            t_hi[b] = hi


def _bins_of(run: StepSource, steps: Sequence[int], bin_of: dict[int, int], nbins: int,
             index: dict[SeamKey, int], byte_rows: list[list[int]], hop_rows: list[list[int]],
             t_lo: list[float], t_hi: list[float]) -> StepBins:
    members_of: list[list[int]] = [[] for _ in range(nbins)]
    for st in steps:
        members_of[bin_of[st]].append(st)
    spans = getattr(run, "step_spans", None) or {}  # a live watch's blocks of old steps
    # a block's steps run up to the next bin's first (those it lists itself are that bin's)
    nexts = [m[0] for m in members_of if m][1:] + [None]
    bins = []
    k = 0  # the bins with members so far
    for b, members in enumerate(members_of):
        last = None
        if members:
            last = spans.get(members[-1], (members[-1], 1))[0]
            after = nexts[k]
            if after is not None and last >= after:
                last = after - 1
            k += 1
        bins.append(StepBin(
            first_step=members[0] if members else None,
            last_step=last,
            num_steps=max(1, sum(spans.get(m, (m, 1))[1] for m in members) if spans
                          else len(members)),
            t0_s=(t_lo[b] - run.t0_ns) / 1e9 if t_lo[b] != math.inf else None,
            t1_s=(t_hi[b] - run.t0_ns) / 1e9 if t_hi[b] != -math.inf else None,
        ))
    return StepBins(
        bins=tuple(bins),
        bytes={k: tuple(byte_rows[n]) for k, n in index.items()},
        hops={k: tuple(hop_rows[n]) for k, n in index.items()},
    )


_STEP = attrgetter("step")
_T_NS = attrgetter("t_ns")
_BLOCK = attrgetter("block")
_NBYTES = attrgetter("nbytes")
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def totals(events: Events, seams: Mapping[SeamKey, SeamStats]) -> Totals:
    """All seams together; the heaviest step groups hops by their step (no step: one group)."""
    per_step: dict[int | None, int] = {}
    # kept hops in runs of one step (in time order), each run summed in C
    hop_bytes = list(map(_NBYTES, events.hops))
    for step, run in groupby(zip(map(_STEP, events.hops), hop_bytes), key=_FIRST):
        per_step[step] = per_step.get(step, 0) + sum(map(_SECOND, run))
    largest = max(hop_bytes, default=0)
    folded = events.seam_steps  # fields taken out in C: this runs at every live update
    blocks = list(filter(None, map(_BLOCK, folded)))
    if blocks:  # a block of old steps (a live watch's) counts by its largest step
        folded = [st for st in folded if st.block is None]
    for step, b in zip(map(attrgetter("step"), folded), map(attrgetter("nbytes_sum"), folded)):
        per_step[step] = per_step.get(step, 0) + b
    largest = max(largest, max(map(attrgetter("nbytes_max"), events.seam_steps), default=0))
    stats = seams.values()
    return Totals(
        total_bytes=sum(s.total_bytes for s in stats),
        bytes_per_step_mean=sum(s.bytes_per_step_mean for s in stats),
        bytes_per_step_max=max([*per_step.values(), *(b.run_bytes_max for b in blocks)],
                               default=0),
        max_hop_bytes=largest,
        moved_bytes_per_step_mean=sum(s.moved_bytes_per_step for s in stats),
    )
