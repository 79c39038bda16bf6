"""Fold hops into per-seam, per-step aggregates: `flowmap trace --aggregate`.

A full trace writes one line per hop, so a long run's trace grows with its
hops. In aggregate mode a process writes its first `detail_steps` steps hop
by hop (the detail window: findings that need per-hop identity, storages and
item ids, run there), then folds each later hop in memory into the aggregate
of its (seam, step, transport) and writes nothing for it. The aggregates are
written as `a` events (flowmap/trace_format.py) at each boundary, so the
trace grows with seams x steps:

- the process's step moves on: `flowmap.step(n)` to another step, or a hop
  whose step is newer than any seen; every open aggregate is written;
- hops before any step (an engine, a worker that never sees one, a warm-up):
  the first `DETAIL_HOPS` x `detail_steps` are written in full, later ones
  fold by step None and are written every `FLUSH_HOPS` of them, or once the
  oldest has waited `FLUSH_US`, checked when a hop comes (there is no
  flusher thread); the first steps, when they come, are still in detail;
- close (exit, SIGTERM, multiprocessing finalizers): what is left.

Lines reach the shard's mapping at once, as every event does, so a SIGKILL
loses only what was folded since the last boundary.

The schema of an aggregate is its seam's leaves merged over every hop folded
so far: a dim that varied is [min, max], a leaf's bytes the largest seen. It
is interned like any schema, so a seam writes a new one only when a range
widens, not once per step. Not folded, one line each as in a full trace:
transport halves (`x`/`y`: the receiver, so the seam, is only known when
both halves are joined), counters, marks, drops and step changes. Hops of
collectives are folded (both ends are known).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from flowmap import trace_format as tf
from flowmap.capture.names import MAX_ITEMS

if TYPE_CHECKING:  # not at run time: a traced child imports the describers at its first hop
    from flowmap.capture.describe import Description
    from flowmap.capture.describers.walk import Leaf
    from flowmap.capture.tracer import Tracer

ENV = "FLOWMAP_AGGREGATE"  # the detail window, in steps, of every traced process of the run
DETAIL_STEPS = 3
DETAIL_HOPS = 1000  # hops per detail step of a process that has seen no step
FLUSH_HOPS = 10_000
FLUSH_US = 10_000_000

# An open aggregate: [hops, nbytes_sum, nbytes_min, nbytes_max, num_items,
# version_min, version_max, t_first_us, t_last_us]; a list, updated in place.
HOPS, SUM, MIN, MAX, ITEMS, VMIN, VMAX, FIRST, LAST = range(9)


def detail_from_environment() -> int | None:
    """The detail window FLOWMAP_AGGREGATE asks for; None when unset or not a count."""
    text = os.environ.get(ENV, "")
    return int(text) if text.isdigit() else None


class _Merged:
    """One seam's leaves merged over its folded hops, in order of first appearance."""

    __slots__ = ("leaves", "index", "last")

    def __init__(self) -> None:
        self.leaves: list[Leaf] = []
        self.index: dict[str, int] = {}
        self.last: list[Leaf] | None = None  # the last hop's leaves: a seam mostly repeats them

    def add(self, leaves: list[Leaf]) -> None:
        if leaves == self.last:
            return
        self.last = leaves
        for leaf in leaves:
            i = self.index.get(leaf[0])
            if i is None:
                if len(self.leaves) < tf.MAX_LEAVES:
                    self.index[leaf[0]] = len(self.leaves)
                    self.leaves.append(leaf)
            elif self.leaves[i] != leaf:
                self.leaves[i] = _merge_leaf(self.leaves[i], leaf)


def _merge_leaf(old: Leaf, new: Leaf) -> Leaf:
    """`old` widened by `new`; a leaf whose kind, dtype, device or rank changed keeps `old`'s."""
    if old[1] != new[1] or old[3] != new[3] or old[4] != new[4] or len(old[2]) != len(new[2]):
        return (*old[:5], max(old[5], new[5]), max(old[6], new[6]), old[7])
    shape = tuple(_merge_dim(a, b) for a, b in zip(old[2], new[2]))
    return (old[0], old[1], shape, old[3], old[4], max(old[5], new[5]), max(old[6], new[6]),
            old[7])


def _merge_dim(a: Any, b: Any) -> Any:
    if a == b:
        return a
    lo = min(a if type(a) is int else a[0], b if type(b) is int else b[0])
    hi = max(a if type(a) is int else a[1], b if type(b) is int else b[1])
    return lo if lo == hi else (lo, hi)


class Folder:
    """The aggregates of one process's tracer (their lines go through its interning)."""

    def __init__(self, tracer: Tracer, detail_steps: int = DETAIL_STEPS) -> None:
        self.tracer = tracer
        self.detail_steps = detail_steps
        self.detail_hops = DETAIL_HOPS * detail_steps  # the window before any step
        self.top: int | None = None  # the newest step seen
        self.current: int | None = None  # the step of the last boundary
        self.entered = 0  # steps begun (new newest steps)
        self.stepless = 0  # hops written in full before any step
        self.open: dict[tuple[str, str, str, int | None, str], list[Any]] = {}
        self.merged: dict[tuple[str, str, str], _Merged] = {}
        self.pending = 0  # hops folded since the last write
        self.oldest_us = 0  # when the oldest of them came

    def hop(self, src: str, dst: str, name: str, d: Description, items: Any, step: Any,
            version: Any, transport: str, t_us: int, nbytes: int | None = None) -> bool:
        """Fold one hop (of `nbytes`, else the payload's); False when it is to be written
        in full (the detail window)."""
        tr = self.tracer
        if step is not None:
            step = int(step)
        else:
            step = tr.step
        if step is None:
            if self.stepless < self.detail_hops:
                self.stepless += 1
                return False
        else:
            if self.top is None or step > self.top:
                with tr.lock:  # a hop of a newer step: the step moved on
                    self.begin(step)
            if self.entered <= self.detail_steps:
                return False
        n_items = _count(tr, items)
        if nbytes is None:
            nbytes = d.nbytes
        v = None if version is None else int(version)  # before any change: may raise
        with tr.lock:
            if tr.closed:
                return True
            key = (src, dst, name, step, transport)
            agg = self.open.get(key)
            if agg is None:
                if not self.open:
                    self.oldest_us = t_us
                self.open[key] = [1, nbytes, nbytes, nbytes, n_items, v, v, t_us, t_us]
            else:
                agg[HOPS] += 1
                agg[SUM] += nbytes
                if nbytes < agg[MIN]:
                    agg[MIN] = nbytes
                if nbytes > agg[MAX]:
                    agg[MAX] = nbytes
                agg[ITEMS] += n_items
                if v is not None:
                    if agg[VMIN] is None or v < agg[VMIN]:
                        agg[VMIN] = v
                    if agg[VMAX] is None or v > agg[VMAX]:
                        agg[VMAX] = v
                agg[LAST] = t_us
            merged = self.merged.get(key[:3])
            if merged is None:
                merged = self.merged[key[:3]] = _Merged()
            merged.add(d.leaves)
            self.pending += 1
            if self.top is None and (self.pending >= FLUSH_HOPS
                                     or t_us - self.oldest_us >= FLUSH_US):
                self.write()
        return True

    def step_moved(self, step: int) -> None:
        """`flowmap.step(step)` (lock held): a boundary when the step changes."""
        if step != self.current:
            self.begin(step)

    def begin(self, step: int) -> None:
        """The process's step moves to `step` (lock held): write what was folded."""
        if step == self.current:
            return  # another thread's hop of the same new step came first
        self.current = step
        self.write()
        if self.top is None or step > self.top:
            self.top = step
            self.entered += 1

    def write(self) -> None:
        """Write every open aggregate as an `a` event (lock held)."""
        tr = self.tracer
        if self.open and not tr.closed:
            for (src, dst, name, step, transport), agg in self.open.items():
                seam = tr.seam_ids.get((src, dst, name))
                if seam is None:
                    seam = tr.seam_ids[(src, dst, name)] = (
                        f"{tr._sid(src)},{tr._sid(dst)},{tr._sid(name)}"
                    )
                merged = self.merged[(src, dst, name)]
                schema = tr._schema_id(merged.leaves)
                tr._emit(
                    f'["{tf.AGGREGATE}",{agg[LAST]},{seam},{schema},{_opt(step)},'
                    f"{tr._sid(transport)},{agg[HOPS]},{min(agg[SUM], tf.MAX_INT)},{agg[MIN]},"
                    f"{agg[MAX]},null,{min(agg[ITEMS], tf.MAX_INT)},{_opt(agg[VMIN])},"
                    f"{_opt(agg[VMAX])},{agg[FIRST]}]"
                )
        self.open.clear()
        self.pending = 0


def _count(tr: Tracer, items: Any) -> int:
    """How many item ids a hop carries, counted as a full trace would write them."""
    t = type(items)
    if t is tuple or t is list:
        return min(len(items), MAX_ITEMS)
    got = tr._items(items)
    return len(got) if got else 0


def _opt(n: int | None) -> str:
    return "null" if n is None else str(n)
