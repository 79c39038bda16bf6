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
from itertools import compress, groupby, repeat
from operator import attrgetter, is_not, itemgetter, not_

from flowmap.gc_pause import paused_gc
from flowmap.model.sources import StepSource
from flowmap.model.types import SeamKey, SeamStats, StepBin, StepBins, Totals
from flowmap.read.events import Hop, SeamStep
from flowmap.read.records import Events


def step_bins(run: StepSource, seams: list[SeamKey], max_bins: int) -> StepBins:
    """Bytes and hops of each of `seams` (every seam of the run) per bin of consecutive steps."""
    with paused_gc():
        return _bins(run, seams, max_bins)


def _bins(run: StepSource, seams: list[SeamKey], max_bins: int) -> StepBins:
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
