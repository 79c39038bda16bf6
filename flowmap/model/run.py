"""A run: its records on one clock, and the figures and view computed from them.

`Run` is what `flowmap.load` returns and what every reader of traces (report,
render, check, diff) starts from. Reading and merging the shards is
`flowmap.read.records`; the per-seam and per-owner statistics are computed
once, on first use, in `flowmap.model.aggregate`, and the view every output
reads is built from them whole (`flowmap.model.view`).
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any

from flowmap.gc_pause import without_gc
from flowmap.model.aggregate import counter_stats, item_stats, owner_stats, seam_stats
from flowmap.model.processes import processes
from flowmap.model.types import (
    CounterStats,
    Health,
    ItemStats,
    OwnerStats,
    Projection,
    SeamKey,
    SeamStats,
)
from flowmap.model.view import RunView, build_view
from flowmap.read.events import Shard
from flowmap.read.fold import DETAIL_HOPS
from flowmap.read.records import Records
from flowmap.rundir import RUNS_DIR as RUNS_DIR  # re-exported: the default run, found by rundir
from flowmap.rundir import is_run_dir as is_run_dir
from flowmap.rundir import newest_run as newest_run
from flowmap.rundir import resolve as resolve


class Run(Records):
    """A run's records (`flowmap.read.records`) and the figures computed from them, once each."""

    def __init__(
        self, path: str, shards: list[Shard], meta: dict[str, Any], problems: list[str] | None = None,
        shared: set[str] | None = None,
    ) -> None:
        super().__init__(path, shards, meta, problems, shared)
        # Set by `flowmap.model.projection.project`: what the figures were scaled to.
        self.projection: Projection | None = None
        # The run as traced, when this one is its projection: findings that read how a
        # leaf's shape changed from hop to hop (`prefix_resend`) read the traced shapes.
        self.traced: Run | None = None

    @cached_property
    def health(self) -> Health:
        return Health(
            shards=len(self.shards),
            events=sum(s.num_events for s in self.shards),
            tracer_errors=sum(max(s.num_errors, len(s.errors)) for s in self.shards),
            error_messages=tuple(m for s in self.shards for m in s.errors),
            truncated_shards=tuple(os.path.basename(s.path) for s in self.shards if s.truncated),
            bad_lines=sum(s.bad_lines for s in self.shards),
            problems=tuple(self.problems),
            processes=processes(self.shards),
        )

    @cached_property
    @without_gc
    def seams(self) -> dict[SeamKey, SeamStats]:
        """`(src, dst, name) -> SeamStats`, heaviest first (ties by key, for determinism)."""
        return seam_stats(self)

    @cached_property
    @without_gc
    def owners(self) -> dict[str, OwnerStats]:
        """`name -> OwnerStats`, sorted by name."""
        return owner_stats(self, self.seams)

    @cached_property
    @without_gc
    def counters(self) -> dict[str, CounterStats]:
        """`name -> CounterStats`, sorted by name."""
        return counter_stats(self)

    @cached_property
    @without_gc
    def items(self) -> ItemStats:
        """`ItemStats`: totals, drops by reason, lifetimes."""
        return item_stats(self)

    @cached_property
    def view(self) -> RunView:
        """The read model every output renders (`flowmap.model.view`), built once per run."""
        return build_view(self)

    def __repr__(self) -> str:
        return f"Run({self.path!r}, hops={self.num_hops}, seams={len(self.seams)})"


def load(path: str | os.PathLike[str], detail_hops: int | None = DETAIL_HOPS) -> Run:
    """Read the run directory (or single shard file) at `path`.

    Past `detail_hops` hops (shared among the shards; None: no limit) the
    reader folds hops into per-seam, per-step records (`Run.seam_steps`).
    """
    return Run.read(path, detail_hops)
