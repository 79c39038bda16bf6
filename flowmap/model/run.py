"""A run: its records on one clock, and the figures and view computed from them.

`Run` is what `flowmap.load` returns and what every reader of traces (report,
render, check, diff) starts from. Reading and merging the shards is
`flowmap.read.records`; the per-seam and per-owner statistics are computed
once, on first use, in `flowmap.model.aggregate`, and the view every output
reads is built from them whole (`flowmap.model.view`).
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from typing import Any

from flowmap import trace_format as tf
from flowmap.errors import NoRunFound, NotATrace
from flowmap.gc_pause import without_gc
from flowmap.model.aggregate import counter_stats, item_stats, owner_stats, seam_stats
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
from flowmap.read.reader import MAX_HEADER, open_regular
from flowmap.read.records import Records
from flowmap.read.run_meta import read_run_meta


class Run(Records):
    """A run's records (`flowmap.read.records`) and the figures computed from them, once each."""

    def __init__(
        self, path: str, shards: list[Shard], meta: dict[str, Any], problems: list[str] | None = None
    ) -> None:
        super().__init__(path, shards, meta, problems)
        # Set by `flowmap.model.projection.project`: what the figures were scaled to.
        self.projection: Projection | None = None

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


RUNS_DIR = "flowmap-runs"


def is_run_dir(path: str) -> bool:
    if not os.path.isdir(path):
        return False
    if os.path.exists(os.path.join(path, tf.RUN_META)):
        return True
    return any(n.endswith(tf.SHARD_SUFFIX) for n in os.listdir(path))


def newest_run(cwd: str = ".") -> str:
    """The run in `cwd` or `cwd/flowmap-runs/` that started last (not the last one written to)."""
    candidates: list[str] = []
    for base in (cwd, os.path.join(cwd, RUNS_DIR)):
        if not os.path.isdir(base):
            continue
        for name in os.listdir(base):
            p = os.path.join(base, name)
            if is_run_dir(p):
                candidates.append(p)
    if not candidates:
        raise NoRunFound(
            "no run found here; trace one with `flowmap trace SCRIPT` or pass RUN explicitly"
        )
    return max(candidates, key=lambda p: (_started_ns(p), p))


def _started_ns(run_dir: str) -> int:
    """When the run started: run.json's `started_wall_ns`, else its earliest shard header.

    Not a file's mtime: writing an HTML page or a merge into an older run
    must not make it the default for `report`, `baseline` and `check`.
    """
    started = read_run_meta(os.path.join(run_dir, tf.RUN_META)).get("started_wall_ns")
    if type(started) is int:
        return started
    starts = []
    for name in os.listdir(run_dir):
        if name.endswith(tf.SHARD_SUFFIX):
            try:
                with open_regular(os.path.join(run_dir, name)) as f:
                    header = json.loads(f.readline(MAX_HEADER + 1))
                t0 = header.get("t0_wall_ns") if isinstance(header, dict) else None
                if type(t0) is int:
                    starts.append(t0)
            except (OSError, ValueError, RecursionError):
                pass
    return min(starts) if starts else int(os.path.getmtime(run_dir) * 1e9)


def resolve(run: str | None) -> str:
    """The RUN argument of a CLI verb: given, or the newest in the working directory."""
    if run is None:
        return newest_run()
    if not os.path.exists(run):
        raise NotATrace(f"{run} does not exist")
    return run
