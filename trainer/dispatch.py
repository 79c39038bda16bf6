"""Dispatch: how many trajectories to keep in flight, and feeding them one at a time.

The driver drips trajectories into the engines until the in-flight count
reaches a *target watermark*, and tops it up whenever a trajectory finishes or
an engine frees capacity. The watermark adapts in both directions:

- **up** when the trainer is ready for a batch and the ready buffer cannot
  give one (rollout is the bottleneck: the trainer starves);
- **down** when samples go stale (rollout ran too far ahead: work was wasted).

Both moves are additive, one env group at a time, and clamped; the two forces
settle the watermark where the buffer holds about what the next batch needs.
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
        """Samples were dropped as too old: rollout is too far ahead, keep fewer in flight."""
        self._set(self.target - self.step)
        self.num_lowers += 1

    def _set(self, value: int) -> None:
        self.target = min(max(value, self.minimum), self.maximum)
        flowmap.counter("target_watermark", self.target)


class TrajectorySource:
    """Env groups from the dataset, expanded into their `n` trajectories (the dispatch unit)."""

    def __init__(self, dataset: Dataset, n: int) -> None:
        self.dataset = dataset
        self.n = n
        self._iter = self._expand()

    def _expand(self) -> Iterator[tuple[EnvGroup, int]]:
        while True:
            group = self.dataset.next_group()
            flowmap.hop("dataset", "driver", group, name="env_group", items=[group.uid])
            for sample_index in range(self.n):
                yield group, sample_index

    def next(self) -> tuple[EnvGroup, int]:
        return next(self._iter)
