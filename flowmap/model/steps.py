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
from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Protocol

from flowmap.gc_pause import paused_gc
from flowmap.model.types import SeamKey, SeamStats, StepBin, StepBins, Totals
from flowmap.read.events import Hop, SeamStep
from flowmap.read.records import Events


class StepSource(Protocol):
    """What step bins are counted from: a run's steps and events (a `RunView`)."""

    @property
    def steps(self) -> Sequence[int]: ...
    @property
    def events(self) -> Events: ...
    @property
    def t0_ns(self) -> int: ...


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
    if steps and None not in map(_STEP, events.hops) and None not in map(_STEP, events.seam_steps):
        # every record has its step, so its bin: the order they come in does not matter
        _bins_by_step(events, bin_of, index, byte_rows, hop_rows, t_lo, t_hi)
        return _bins_of(run, steps, bin_of, nbins, index, byte_rows, hop_rows, t_lo, t_hi)
    cur = 0
    for h in _in_time_order(events):
        if h.step is not None:
            cur = bin_of[h.step]
        n = index[(h.src, h.dst, h.name)]
        if isinstance(h, SeamStep):
            byte_rows[n][cur] += h.nbytes_sum
            hop_rows[n][cur] += h.hops
            t_first = h.t_first_ns
        else:
            byte_rows[n][cur] += h.nbytes
            hop_rows[n][cur] += 1
            t_first = h.t_ns
        if t_first < t_lo[cur]:
            t_lo[cur] = t_first
        if h.t_ns > t_hi[cur]:
            t_hi[cur] = h.t_ns
    return _bins_of(run, steps, bin_of, nbins, index, byte_rows, hop_rows, t_lo, t_hi)


def _bins_by_step(events: Events, bin_of: dict[int, int], index: dict[SeamKey, int],
                  byte_rows: list[list[int]], hop_rows: list[list[int]], t_lo: list[float],
                  t_hi: list[float]) -> None:
    """`_bins`' sums where every record has its step (no merge by time needed)."""
    for h in events.hops:
        b = bin_of[h.step]  # type: ignore[index]  # every step is set (checked by the caller)
        n = index[(h.src, h.dst, h.name)]
        byte_rows[n][b] += h.nbytes
        hop_rows[n][b] += 1
        if h.t_ns < t_lo[b]:
            t_lo[b] = h.t_ns
        if h.t_ns > t_hi[b]:
            t_hi[b] = h.t_ns
    for st in events.seam_steps:
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
    bins = []
    for b, members in enumerate(members_of):
        bins.append(StepBin(
            first_step=members[0] if members else None,
            last_step=members[-1] if members else None,
            num_steps=max(1, len(members)),
            t0_s=(t_lo[b] - run.t0_ns) / 1e9 if t_lo[b] != math.inf else None,
            t1_s=(t_hi[b] - run.t0_ns) / 1e9 if t_hi[b] != -math.inf else None,
        ))
    return StepBins(
        bins=tuple(bins),
        bytes={k: tuple(byte_rows[n]) for k, n in index.items()},
        hops={k: tuple(hop_rows[n]) for k, n in index.items()},
    )


_STEP = attrgetter("step")


def _in_time_order(events: Events) -> Iterator[Hop | SeamStep]:
    if not events.seam_steps:
        return iter(events.hops)
    # Both lists are sorted by time: a stable sort of the two runs merges them as
    # heapq.merge would (hops first on equal times), in C.
    both: list[Hop | SeamStep] = [*events.hops, *events.seam_steps]
    both.sort(key=attrgetter("t_ns"))
    return iter(both)


def totals(events: Events, seams: Mapping[SeamKey, SeamStats]) -> Totals:
    """All seams together; the heaviest step groups hops by their step (no step: one group)."""
    per_step: dict[int | None, int] = {}
    largest = 0
    for h in events.hops:
        per_step[h.step] = per_step.get(h.step, 0) + h.nbytes
        if h.nbytes > largest:
            largest = h.nbytes
    folded = events.seam_steps  # fields taken out in C: this runs at every live update
    for step, b in zip(map(attrgetter("step"), folded), map(attrgetter("nbytes_sum"), folded)):
        per_step[step] = per_step.get(step, 0) + b
    largest = max(largest, max(map(attrgetter("nbytes_max"), folded), default=0))
    stats = seams.values()
    return Totals(
        total_bytes=sum(s.total_bytes for s in stats),
        bytes_per_step_mean=sum(s.bytes_per_step_mean for s in stats),
        bytes_per_step_max=max(per_step.values(), default=0),
        max_hop_bytes=largest,
        moved_bytes_per_step_mean=sum(s.moved_bytes_per_step for s in stats),
    )
