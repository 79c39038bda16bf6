"""Fold events into per-seam, per-step aggregates: `flowmap trace --aggregate`.

A full trace writes one line per hop, so a long run's trace grows with its
hops. In aggregate mode a process writes its first `detail_steps` steps event
by event (the detail window: findings that need per-hop identity, storages
and item ids, run there), then folds each later event in memory into the
aggregate of its key and step and writes nothing for it. The aggregates are
written at each boundary (flowmap/trace_format.py has their lines, `flowmap.writer`
writes them), so the
trace grows with seams x steps:

- hops: per (seam, step, transport), event `a`; collectives among them (both
  ends are known);
- send halves of a transport (the receiver unknown to the sender): per
  (seam, step, transport, channel), `X`; receive halves per (owner, name,
  transport, channel, step), `Y`: the reader joins the two by channel;
- counter samples per (name, owner, step), `C`: count, sum, least, largest
  and last value, which is every statistic a counter is read for;
- phase markers per (name, owner, step), `M`; drops per (owner, reason,
  step), `D`, with how many item ids they named.

Boundaries:

- the process's step moves on: `flowmap.step(n)` to another step, or a hop
  whose step is newer than any seen; every open aggregate is written;
- events before any step (an engine, a worker that never sees one, a
  warm-up): the first `STEPLESS_HOPS_PER_STEP` x `detail_steps` are written in full,
  later ones fold by step None and are written every `FLUSH_HOPS` of them,
  or once the oldest has waited `FLUSH_US`, checked when an event comes
  (there is no flusher thread); the first steps, when they come, are still
  in detail;
- close (exit, SIGTERM, multiprocessing finalizers): what is left.

Lines reach the shard's mapping at once, as every event does, so a SIGKILL
loses only what was folded since the last boundary.

The schema of an aggregate is its seam's leaves merged over every hop folded
so far: a dim that varied is [min, max], a leaf's bytes the largest seen. It
is interned like any schema, so a seam writes a new one only when a range
widens, not once per step. Step changes (`p`) and tracer errors are written
one line each, as in a full trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowmap import environment
from flowmap import trace_format as tf
from flowmap.capture.names import MAX_ITEMS
from flowmap.writer import HopTally
from flowmap.writer.encoder import clamp_number

if TYPE_CHECKING:  # not at run time: a traced child imports the describers at its first hop
    from flowmap.capture.describe import Description
    from flowmap.capture.describers.walk import Leaf
    from flowmap.capture.tracer import Tracer

ENV = environment.AGGREGATE  # the detail window, in steps, of every traced process of the run
DETAIL_STEPS = 3
STEPLESS_HOPS_PER_STEP = 1000  # events per detail step of a process that has seen no step
FLUSH_HOPS = 10_000
FLUSH_US = 10_000_000


def detail_from_environment() -> int | None:
    """The detail window FLOWMAP_AGGREGATE asks for; None when unset or not a count."""
    text = environment.get(ENV) or ""
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


class ProcessFolder:
    """The aggregates of one process's tracer, written through its shard's writer (and under
    the writer's lock, which guards these tables too)."""

    def __init__(self, tracer: Tracer, detail_steps: int = DETAIL_STEPS) -> None:
        self.tracer = tracer
        self.writer = tracer.writer
        self.lock = tracer.writer.lock
        self.detail_steps = detail_steps
        self.detail_hops = STEPLESS_HOPS_PER_STEP * detail_steps  # the window before any step
        self.top: int | None = None  # the newest step seen
        self.current: int | None = None  # the step of the last boundary
        self.entered = 0  # steps begun (new newest steps)
        self.stepless = 0  # events written in full before any step
        # Open aggregates by kind, each keyed by what its line names plus the step.
        self.open: dict[tuple[str, str, str, int | None, str], HopTally] = {}
        self.sends: dict[tuple[str, str, str, int | None, str, str], HopTally] = {}
        self.receives: dict[tuple[Any, ...], list[Any]] = {}
        self.counters: dict[tuple[str, str, int | None], list[Any]] = {}
        self.marks: dict[tuple[str, str, int | None], list[Any]] = {}
        self.drops: dict[tuple[str, str, int | None], list[Any]] = {}
        self.merged: dict[tuple[str, str, str], _Merged] = {}
        self.pending = 0  # events folded since the last write
        self.oldest_us = 0  # when the oldest of them came

    def _past(self, step: int | None) -> bool:
        """Whether an event of `step` lies past the detail window (no lock held); a newer
        step than any seen is a boundary."""
        if step is None:
            if self.stepless < self.detail_hops:
                self.stepless += 1
                return False
            return True
        if self.top is None or step > self.top:
            with self.lock:  # an event of a newer step: the step moved on
                self.begin(step)
        return self.entered > self.detail_steps

    def past_detail(self) -> bool:
        """Whether events now come past the detail window (no per-hop detail then)."""
        if self.top is not None:
            return self.entered > self.detail_steps
        return self.stepless >= self.detail_hops

    def _added(self, t_us: int) -> None:
        """One more event folded (lock held): a process without steps writes on its own clock."""
        if not self.pending:
            self.oldest_us = t_us
        self.pending += 1
        if self.top is None and (self.pending >= FLUSH_HOPS or t_us - self.oldest_us >= FLUSH_US):
            self.write()

    def hop(self, src: str, dst: str, name: str, d: Description, items: Any, step: Any,
            version: Any, transport: str, t_us: int, nbytes: int | None = None,
            exact_step: bool = False) -> bool:
        """Fold one hop (of `nbytes`, else the payload's); False when it is to be written
        in full (the detail window). `step` None is the process's step now, unless
        `exact_step` (a collective read later, issued before any step)."""
        tr = self.tracer
        if step is not None:
            step = int(step)
        elif not exact_step:
            step = tr.step
        if not self._past(step):
            return False
        n_items = _count(tr, items)
        v = None if version is None else int(version)  # before any change: may raise
        with self.lock:
            if tr.closed:
                return True
            _add_hop(self.open, (src, dst, name, step, transport), t_us,
                     d.nbytes if nbytes is None else nbytes, n_items, v, None)
            self._merge((src, dst, name), d)
            self._added(t_us)
        return True

    def send_half(self, src: str, dst: str, name: str, d: Description, nbytes: int,
                  transport: str, channel: str, wire: int | None, t_us: int,
                  step: int | None) -> bool:
        """Fold the send half of a transport hop sent in `step`; False inside the detail
        window."""
        tr = self.tracer
        if not self._past(step):
            return False
        with self.lock:
            if not tr.closed:
                _add_hop(self.sends, (src, dst, name, step, transport, channel), t_us, nbytes,
                         0, None, wire)
                self._merge((src, dst, name), d)
                self._added(t_us)
        return True

    def receive_half(self, owner: str, name: str, transport: str, channel: str,
                     wire: int | None, t_us: int) -> bool:
        """Fold the receive half of a transport hop: a count per owner and channel."""
        return self._tally(self.receives, (owner, name, transport, channel), wire, t_us)

    def counter(self, owner: str, name: str, value: float, t_us: int) -> bool:
        """Fold one counter sample (a finite float); False inside the detail window."""
        tr = self.tracer
        step = tr.step
        if not self._past(step):
            return False
        with self.lock:
            if not tr.closed:
                key = (name, owner, step)
                agg = self.counters.get(key)
                if agg is None:  # [count, sum, min, max, last, t_first_us, t_last_us]
                    self.counters[key] = [1, value, value, value, value, t_us, t_us]
                else:
                    agg[0] += 1
                    agg[1] += value
                    if value < agg[2]:
                        agg[2] = value
                    if value > agg[3]:
                        agg[3] = value
                    agg[4] = value
                    agg[6] = t_us
                self._added(t_us)
        return True

    def mark(self, owner: str, name: str, t_us: int) -> bool:
        """Fold one phase marker; False inside the detail window."""
        return self._tally(self.marks, (name, owner), 0, t_us)

    def drop(self, owner: str, reason: str, n_items: int, t_us: int) -> bool:
        """Fold one drop of `n_items` item ids; False inside the detail window."""
        return self._tally(self.drops, (owner, reason), n_items, t_us)

    def _tally(self, table: dict[Any, list[Any]], names: tuple[str, ...], n: int | None,
               t_us: int) -> bool:
        """Count one event under `names` and the process's step, summing `n` (item ids,
        wire bytes; None: not known)."""
        tr = self.tracer
        step = tr.step
        if not self._past(step):
            return False
        with self.lock:
            if not tr.closed:
                key = (*names, step)
                agg = table.get(key)
                if agg is None:  # [count, sum of n, t_first_us, t_last_us]
                    table[key] = [1, n, t_us, t_us]
                else:
                    agg[0] += 1
                    if n is not None:
                        agg[1] = n + (agg[1] or 0)
                    agg[3] = t_us
                self._added(t_us)
        return True

    def _merge(self, seam: tuple[str, str, str], d: Description) -> None:
        merged = self.merged.get(seam)
        if merged is None:
            merged = self.merged[seam] = _Merged()
        merged.add(d.leaves)

    def step_moved(self, step: int) -> None:
        """`flowmap.step(step)` (lock held): a boundary when the step changes."""
        if step != self.current:
            self.begin(step)

    def begin(self, step: int) -> None:
        """The process's step moves to `step` (lock held): write what was folded."""
        if step == self.current:
            return  # another thread's event of the same new step came first
        self.current = step
        self.write()
        if self.top is None or step > self.top:
            self.top = step
            self.entered += 1

    def write(self) -> None:
        """Write every open aggregate as its event (lock held)."""
        if not self.tracer.closed:
            w = self.writer
            for (src, dst, name, step, transport), tally in self.open.items():
                w.hop_fold(src, dst, name, self.merged[(src, dst, name)].leaves, step, transport,
                           tally)
            for (src, dst, name, step, transport, channel), tally in self.sends.items():
                w.send_fold(src, dst, name, self.merged[(src, dst, name)].leaves, step,
                            transport, channel, tally)
            for (owner, name, transport, channel, step), (n, wire, first, last) in \
                    self.receives.items():
                w.receive_fold(last, owner, name, transport, channel, step, n, wire, first)
            for (name, owner, step), (n, total, lo, hi, value, first, last) in \
                    self.counters.items():
                if n == 1:  # one sample: its own line is shorter, and exact
                    w.counter(last, name, clamp_number(value), owner)
                    continue
                w.counter_fold(last, name, owner, step, n, total, lo, hi, value, first)
            for (name, owner, step), (n, _, first, last) in self.marks.items():
                if n == 1:
                    w.mark(last, name, owner)
                    continue
                w.mark_fold(last, name, owner, step, n, first)
            for (owner, reason, step), (n, items, first, last) in self.drops.items():
                w.drop_fold(last, owner, reason, step, n, items, first)
        for table in (self.open, self.sends, self.receives, self.counters, self.marks,
                      self.drops):
            table.clear()
        self.pending = 0


def _add_hop(table: dict[Any, HopTally], key: Any, t_us: int, nbytes: int, n_items: int,
             v: int | None, wire: int | None) -> None:
    """Add one hop to the aggregate of `key` in `table` (lock held)."""
    tally = table.get(key)
    if tally is None:
        table[key] = HopTally(nbytes, t_us, n_items, v, wire)
    else:
        tally.add(nbytes, t_us, n_items, v, wire)


def _count(tr: Tracer, items: Any) -> int:
    """How many item ids a hop carries, counted as a full trace would write them."""
    t = type(items)
    if t is tuple or t is list:
        return min(len(items), MAX_ITEMS)
    got = tr.read_items(items)
    return len(got) if got else 0
