"""A run's records: every shard of one traced execution, merged on one clock.

What reading hands the model: the hops (transport halves joined, one detail
window for the whole run), folded hops, counter samples, marks and drops,
each list sorted by time, with the shards and `run.json` they came from and
what went wrong reading them. Nothing here aggregates: `flowmap.model` builds
the per-seam figures and the view from these.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, compress, repeat
from operator import attrgetter, is_, not_
from typing import Any, TypeVar

from flowmap.gc_pause import paused_gc
from flowmap.read.events import (
    CounterFold,
    CounterSample,
    Drop,
    DropFold,
    Hop,
    Mark,
    MarkFold,
    SeamStep,
    Shard,
)
from flowmap.read.fold import DETAIL_HOPS, Cut, fold_hops
from flowmap.read.halves import join_run as join_halves
from flowmap.read.incremental import IncrementalReader

R = TypeVar("R", bound="Records")


@dataclass(frozen=True, slots=True)
class Events:
    """The run's records on one clock, each list sorted by time."""

    shards: Sequence[Shard]
    hops: Sequence[Hop]
    counter_samples: Sequence[CounterSample]
    marks: Sequence[Mark]
    drops: Sequence[Drop]
    seam_steps: Sequence[SeamStep] = ()  # hops folded per seam and step, past the detail window
    counter_folds: Sequence[CounterFold] = ()  # the same for counter samples, marks and drops
    mark_folds: Sequence[MarkFold] = ()
    drop_folds: Sequence[DropFold] = ()


class Records:
    """Every record of a run, on one clock; `flowmap.model.run.Run` adds the figures."""

    def __init__(
        self, path: str, shards: list[Shard], meta: dict[str, Any], problems: list[str] | None = None,
        shared: set[str] | None = None,
    ) -> None:
        self.path = path
        self.problems = problems if problems is not None else [p for s in shards for p in s.problems()]
        self.shards = shards
        self.meta = meta
        joined = join_halves(shards)
        hops = [*chain.from_iterable(s.hops for s in shards), *joined.hops]
        folded = [*chain.from_iterable(s.seam_steps for s in shards), *joined.seam_steps]
        # Channels several owners read whose folded sends were shared out by count (`shared`:
        # those of a live watch's settled halves, `flowmap.read.settle`).
        self.shared_channels: list[str] = sorted({*joined.shared, *shared}) if shared else joined.shared
        cut = _detail_cut(shards)
        if cut is not None:  # one detail window for the whole run: fold what lies past it
            past = _past(cut, hops)
            folded += fold_hops(compress(hops, past))
            hops = list(compress(hops, map(not_, past)))
        self.hops: list[Hop] = sorted(hops, key=_T_NS)
        # Hops folded per seam and step (`flowmap.read.fold`), past the detail window.
        # (Fields are taken out in C: a live watch builds this at every update.)
        self.seam_steps: list[SeamStep] = sorted(folded, key=_T_NS)
        self.counter_samples: list[CounterSample] = sorted(
            (c for s in shards for c in s.counters), key=lambda c: c.t_ns
        )
        self.marks: list[Mark] = sorted((m for s in shards for m in s.marks), key=lambda m: m.t_ns)
        self.drops: list[Drop] = sorted((d for s in shards for d in s.drops), key=lambda d: d.t_ns)
        # Counter samples, marks and drops that `trace --aggregate` folded per step.
        self.counter_folds: list[CounterFold] = sorted(
            (c for s in shards for c in s.counter_folds), key=lambda c: c.t_ns)
        self.mark_folds: list[MarkFold] = sorted(
            (m for s in shards for m in s.mark_folds), key=lambda m: m.t_ns)
        self.drop_folds: list[DropFold] = sorted(
            (d for s in shards for d in s.drop_folds), key=lambda d: d.t_ns)
        starts = [s.t0_mono_ns for s in shards]
        self.t0_ns = min(starts) if starts else 0

    @classmethod
    def read(cls: type[R], path: str | os.PathLike[str], detail_hops: int | None = DETAIL_HOPS
             ) -> R:
        """Read the run directory (or single shard file) at `path`.

        Past `detail_hops` hops (shared among the shards; None: no limit) the
        reader folds hops into per-seam, per-step records (`seam_steps`).
        """
        reader = IncrementalReader(path, detail_hops, finished=True)  # a live watch's reader
        with paused_gc():
            reader.poll()
            return reader.records(cls)

    @property
    def truncated(self) -> bool:
        return any(s.truncated for s in self.shards)

    @cached_property
    def steps(self) -> list[int]:
        """The training steps seen on hops (kept or folded), sorted; empty when none was set."""
        seen = set(map(_STEP, self.hops))
        seen.update(map(_STEP, self.seam_steps))
        seen.discard(None)
        return sorted(seen)

    @cached_property
    def step_spans(self) -> dict[int, tuple[int, int]]:
        """Where a live watch holds old steps in blocks (`flowmap.read.blocks`): each block's
        first step (listed in `steps`) -> (its last step, how many steps it stands for: its
        own, less those `steps` lists apart from its first). Empty for a run read once:
        every step is listed."""
        blocks = {st.block.first: st.block for st in self.seam_steps if st.block is not None}
        if not blocks:
            return {}
        listed = self.steps
        out = {}
        for first, block in blocks.items():
            inside = listed[bisect_left(listed, first):bisect_right(listed, block.last)]
            out[first] = (block.last, block.count - sum(1 for s in inside if s != first
                                                       and block.holds(s)))
        return out

    @property
    def num_hops(self) -> int:
        """Every hop of the run, kept one by one or folded."""
        return len(self.hops) + int(sum(map(_HOPS, self.seam_steps)))

    @property
    def num_steps(self) -> int:
        """The denominator of every "per step" figure: at least 1."""
        return max(1, self.step_count)

    @property
    def step_count(self) -> int:
        """How many training steps the run has seen (0: none was set)."""
        return len(self.steps) + sum(n - 1 for _, n in self.step_spans.values())

    @property
    def events(self) -> Events:
        """The time-ordered records, as the view carries them."""
        return Events(self.shards, self.hops, self.counter_samples, self.marks, self.drops,
                      self.seam_steps, self.counter_folds, self.mark_folds, self.drop_folds)


_T_NS = attrgetter("t_ns")
_STEP = attrgetter("step")
_HOPS = attrgetter("hops")


def _past(cut: Cut, hops: list[Hop]) -> list[bool]:
    """`cut.past` of each hop, compared in C but for the few without a step (a live watch
    reads this at every update)."""
    if cut.step is None:
        return [cut.past(h.step, h.t_ns) for h in hops]
    steps = list(map(_STEP, hops))
    loose = list(compress(range(len(steps)), map(is_, steps, repeat(None))))
    for i in loose:
        steps[i] = cut.step  # not past by step: by time, below
    past = list(map(cut.step.__lt__, steps))
    for i in loose:
        past[i] = hops[i].t_ns > cut.t_ns
    return past


def _detail_cut(shards: list[Shard]) -> Cut | None:
    """The earliest end of any shard's detail window: where the run's window ends."""
    cut: Cut | None = None
    for s in shards:
        if s.fold_cut is not None:
            cut = Cut(*s.fold_cut).earlier(cut)
    return cut
