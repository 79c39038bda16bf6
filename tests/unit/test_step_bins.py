"""Step bins place each record without a step where a walk in time order would.

GIVEN runs of kept hops and folded steps drawn at random (equal times across and within
the two lists, records without a step anywhere, none with one at all), WHEN they are
binned, THEN the bins equal those of the plain
walk: every record in time order (hops first at equal times), a record without a step
in the bin of the last step seen before it, or in the first bin.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from flowmap.model.steps import step_bins
from flowmap.read.events import Hop, SeamStep
from flowmap.read.records import Events

SEAMS = [("a", "b", "x"), ("b", "c", "y"), ("c", "a", "z")]


@dataclass
class _Run:
    steps: list[int]
    events: Events
    t0_ns: int = 0


def _run(rng: random.Random, n_hops: int, n_folded: int, loose: float) -> _Run:
    def step() -> int | None:
        return None if rng.random() < loose else rng.randrange(12)

    hops = sorted((Hop(rng.randrange(40), 1, *rng.choice(SEAMS), rng.randrange(1, 100), (), (),
                       step(), None, "ref", ()) for _ in range(n_hops)), key=lambda h: h.t_ns)
    folded = []
    for _ in range(n_folded):
        t = rng.randrange(40)
        folded.append(SeamStep(t, t - rng.randrange(3), 1, *rng.choice(SEAMS), step(), "ref",
                               rng.randrange(1, 9), rng.randrange(100, 900), 1, 99, None, 0,
                               None, None, ()))
    folded.sort(key=lambda st: st.t_ns)
    steps = sorted({r.step for r in [*hops, *folded] if r.step is not None})
    return _Run(steps, Events([], hops, [], [], [], folded))


def _walked(run: _Run, max_bins: int) -> tuple[object, ...]:
    """The plain walk: every record in time order, hops first at equal times."""
    steps = run.steps
    nbins = max(1, min(len(steps), max_bins))
    bin_of = {st: i * nbins // len(steps) for i, st in enumerate(steps)}
    rows = {k: [0] * nbins for k in SEAMS}
    hop_rows = {k: [0] * nbins for k in SEAMS}
    t_lo, t_hi = [math.inf] * nbins, [-math.inf] * nbins
    both: list[Hop | SeamStep] = [*run.events.hops, *run.events.seam_steps]
    both.sort(key=lambda r: r.t_ns)
    cur = 0
    for r in both:
        if r.step is not None:
            cur = bin_of[r.step]
        key = (r.src, r.dst, r.name)
        if isinstance(r, SeamStep):
            rows[key][cur] += r.nbytes_sum
            hop_rows[key][cur] += r.hops
            t_lo[cur] = min(t_lo[cur], r.t_first_ns)
        else:
            rows[key][cur] += r.nbytes
            hop_rows[key][cur] += 1
            t_lo[cur] = min(t_lo[cur], r.t_ns)
        t_hi[cur] = max(t_hi[cur], r.t_ns)
    times = [(lo if lo != math.inf else None, hi if hi != -math.inf else None)
             for lo, hi in zip(t_lo, t_hi)]
    return ({k: tuple(v) for k, v in rows.items()}, {k: tuple(v) for k, v in hop_rows.items()},
            times)


def _binned(run: _Run, max_bins: int) -> tuple[object, ...]:
    b = step_bins(run, list(SEAMS), max_bins)
    times = [(None if x.t0_s is None else round(x.t0_s * 1e9),
              None if x.t1_s is None else round(x.t1_s * 1e9)) for x in b.bins]
    return dict(b.bytes), dict(b.hops), times


@pytest.mark.parametrize("loose", [0.0, 0.1, 0.5, 1.0])
def test_records_without_a_step_fall_where_a_walk_in_time_order_puts_them(loose):
    rng = random.Random(int(loose * 100))
    compared = 0
    for trial in range(60):
        run = _run(rng, rng.randrange(0, 30), rng.randrange(0, 30), loose)
        for max_bins in (1, 3, 50):
            want = _walked(run, max_bins)
            assert _binned(run, max_bins) == want, (trial, max_bins)
            compared += 1
    assert compared == 180
