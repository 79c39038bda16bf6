"""A run: every shard of one traced execution, merged on one clock.

`Run` is what `flowmap.load` returns and what every reader of traces (report,
render, check, diff) starts from. The per-seam and per-owner statistics are
computed once, lazily, in `flowmap.model.aggregate`.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property, wraps
from typing import TYPE_CHECKING, Any, TypeVar

from flowmap import trace_format as tf
from flowmap.errors import NoRunFound, NotATrace
from flowmap.model.events import CounterFold, DropFold, MarkFold, SeamStep
from flowmap.model.fold import DETAIL_HOPS, Cut, fold_hops
from flowmap.model.halves import join_run as join_halves
from flowmap.model.reader import (
    MAX_HEADER,
    CounterSample,
    Drop,
    Hop,
    Mark,
    Shard,
    open_regular,
)
from flowmap.model.run_meta import read_run_meta
from flowmap.model.shards import read_run_shards
from flowmap.model.types import (
    CounterStats,
    Health,
    ItemStats,
    OwnerStats,
    Projection,
    SeamKey,
    SeamStats,
)

if TYPE_CHECKING:
    from flowmap.model.view import RunView

T = TypeVar("T")


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic GC while building millions of records that hold no cycles.

    With a million hops alive, every generation-2 pass walks them all; reading
    a large run spent most of its time there.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _without_gc(fn: Callable[..., T]) -> Callable[..., T]:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        with paused_gc():
            return fn(*args, **kwargs)

    return wrapper


class Run:
    def __init__(
        self, path: str, shards: list[Shard], meta: dict[str, Any], problems: list[str] | None = None
    ) -> None:
        self.path = path
        self.problems = problems if problems is not None else [p for s in shards for p in s.problems()]
        self.shards = shards
        self.meta = meta
        joined = join_halves(shards)
        hops = [h for s in shards for h in s.hops] + joined.hops
        folded = [st for s in shards for st in s.seam_steps] + joined.seam_steps
        # Channels several owners read whose folded sends were shared out by count.
        self.shared_channels: list[str] = joined.shared
        cut = _detail_cut(shards)
        if cut is not None:  # one detail window for the whole run: fold what lies past it
            past = [cut.past(h.step, h.t_ns) for h in hops]
            folded += fold_hops(h for h, p in zip(hops, past) if p)
            hops = [h for h, p in zip(hops, past) if not p]
        self.hops: list[Hop] = sorted(hops, key=lambda h: h.t_ns)
        # Hops folded per seam and step (`flowmap.model.fold`), past the detail window.
        self.seam_steps: list[SeamStep] = sorted(folded, key=lambda st: st.t_ns)
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
        # Set by `flowmap.model.projection.project`: what the figures were scaled to.
        self.projection: Projection | None = None
        # The run as traced, when this one is its projection: findings that read how a
        # leaf's shape changed from hop to hop (`prefix_resend`) read the traced shapes.
        self.traced: Run | None = None

    @property
    def truncated(self) -> bool:
        return any(s.truncated for s in self.shards)

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
    def steps(self) -> list[int]:
        """The training steps seen on hops (kept or folded), sorted; empty when none was set."""
        seen = {h.step for h in self.hops if h.step is not None}
        return sorted(seen.union(st.step for st in self.seam_steps if st.step is not None))

    @property
    def num_hops(self) -> int:
        """Every hop of the run, kept one by one or folded."""
        return len(self.hops) + sum(st.hops for st in self.seam_steps)

    @property
    def num_steps(self) -> int:
        """The denominator of every "per step" figure: at least 1."""
        return max(1, len(self.steps))

    @cached_property
    @_without_gc
    def seams(self) -> dict[SeamKey, SeamStats]:
        """`(src, dst, name) -> SeamStats`, heaviest first (ties by key, for determinism)."""
        from flowmap.model.aggregate import seam_stats

        return seam_stats(self)

    @cached_property
    @_without_gc
    def owners(self) -> dict[str, OwnerStats]:
        """`name -> OwnerStats`, sorted by name."""
        from flowmap.model.aggregate import owner_stats

        return owner_stats(self)

    @cached_property
    @_without_gc
    def counters(self) -> dict[str, CounterStats]:
        """`name -> CounterStats`, sorted by name."""
        from flowmap.model.aggregate import counter_stats

        return counter_stats(self)

    @cached_property
    @_without_gc
    def items(self) -> ItemStats:
        """`ItemStats`: totals, drops by reason, lifetimes."""
        from flowmap.model.aggregate import item_stats

        return item_stats(self)

    @cached_property
    def view(self) -> RunView:
        """The read model every output renders (`flowmap.model.view`), built once per run."""
        from flowmap.model.view import build_view

        return build_view(self)

    def __repr__(self) -> str:
        return f"Run({self.path!r}, hops={self.num_hops}, seams={len(self.seams)})"


def _detail_cut(shards: list[Shard]) -> Cut | None:
    """The earliest end of any shard's detail window: where the run's window ends."""
    cut: Cut | None = None
    for s in shards:
        if s.fold_cut is not None:
            cut = Cut(*s.fold_cut).earlier(cut)
    return cut


def load(path: str | os.PathLike[str], detail_hops: int | None = DETAIL_HOPS) -> Run:
    """Read the run directory (or single shard file) at `path`.

    Past `detail_hops` hops (shared among the shards; None: no limit) the
    reader folds hops into per-seam, per-step records (`Run.seam_steps`).
    """
    path = os.fspath(path)
    with paused_gc():
        shards, problems = read_run_shards(path, detail_hops)
    meta: dict[str, Any] = {}
    if os.path.isdir(path):
        meta = read_run_meta(os.path.join(path, tf.RUN_META), problems)
    with paused_gc():
        return Run(path, shards, meta, problems)


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
