"""Dispatch: how many trajectories to keep in flight, and feeding them one at a time.

The driver drips trajectories into the engines until the in-flight count
reaches a *target watermark*, and tops it up whenever a trajectory finishes or
an engine frees capacity. The watermark adapts in both directions:

- **up** when the trainer is ready for a batch and the ready buffer cannot
  give one (rollout is the bottleneck: the trainer starves);
- **down** when a group goes stale, or the dry run finds work (waiting or
  still in rollout) that would be too old for the next batch (rollout is
  running too far ahead; at most once per batch).

Both moves are additive, one env group at a time, and clamped.

The watermark says how much runs at once; the *staleness budget* says how far
ahead rollout may run at all. A group registered at version `v` can train in
batches up to `v + max_staleness`, so at version `v`, with batches up to
`next_batch - 1` already taken, at most `(v + max_staleness + 1 - next_batch)`
batches of groups can still use what is started now: a new group starts only
while the live groups (dispatched, neither trained nor dropped) are fewer.
Rollout then never makes work that must go stale (AReaL's staleness capacity),
and a dropped or filtered group frees its place, so the batch is refilled
(over-sampling, as verl's dynamic sampling keeps generating until a batch is
full). With the budget bounding the lead, stale drops are rare, and the
watermark climbs while the trainer starves and then holds.

Synchronous mode is the same rule with `max_staleness = 0`: exactly one
batch of groups is generated per version, under that version's weights.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import flowmap
from flowmap.trainer.task import Dataset, EnvGroup


@dataclass(slots=True)
class Watermark:
    target: int
    minimum: int
    maximum: int
    step: int  # one env group's trajectories
    num_raises: int = 0
    num_lowers: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.maximum:
            raise ValueError(f"watermark bounds must satisfy 1 <= {self.minimum} <= {self.maximum}")
        self.target = min(max(self.target, self.minimum), self.maximum)

    def on_starved(self) -> None:
        """The trainer waits on an empty ready buffer: keep more trajectories in flight."""
        self._set(self.target + self.step)
        self.num_raises += 1

    def on_stale(self) -> None:
        """Work went, or is about to go, stale: rollout is too far ahead, keep fewer in flight."""
        self._set(self.target - self.step)
        self.num_lowers += 1

    def _set(self, value: int) -> None:
        self.target = min(max(value, self.minimum), self.maximum)
        flowmap.counter("target_watermark", self.target)


@dataclass(slots=True)
class StalenessBudget:
    """Env groups that may be live at once, from the version and the next batch id."""

    groups_per_batch: int
    max_staleness: int  # 0 in synchronous mode
    live: int = 0  # groups started and neither taken for a batch nor dropped

    def room(self, version: int, next_batch: int) -> int:
        """How many more groups may start now without any having to go stale."""
        usable_batches = version + self.max_staleness + 1 - next_batch
        return usable_batches * self.groups_per_batch - self.live

    def started(self) -> None:
        self.live += 1

    def retired(self, num_groups: int) -> None:
        """Groups taken for a batch or dropped: their places are free again."""
        self.live -= num_groups


class TrajectorySource:
    """Env groups from the dataset, expanded into their `n` trajectories (the dispatch unit)."""

    def __init__(self, dataset: Dataset, n: int) -> None:
        self.dataset = dataset
        self.n = n
        self._iter = self._expand()
        self.num_dispatched = 0  # trajectories handed out so far

    def _expand(self) -> Iterator[tuple[EnvGroup, int]]:
        while True:
            group = self.dataset.next_group()
            flowmap.hop("dataset", "driver", group, name="env_group", items=[group.uid])
            for sample_index in range(self.n):
                yield group, sample_index

    @property
    def starts_group(self) -> bool:
        """Whether the next trajectory is the first of a new env group."""
        return self.num_dispatched % self.n == 0

    def next(self) -> tuple[EnvGroup, int]:
        self.num_dispatched += 1
        return next(self._iter)
