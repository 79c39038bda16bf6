"""Fold hops into `SeamStep`s: one record per seam, step, transport and process.

A ten-million-hop trace cannot be held as ten million `Hop`s (a few hundred
bytes each), yet every per-seam figure the outputs show — hops, total and
largest bytes, bytes per step — is a sum or a maximum over a seam's hops in
a step. So past a detail window the reader adds each hop's fields into an
accumulator keyed by (seam, step, transport) instead of building a record,
and memory grows with seams x steps, not with hops. The same fold serves
the run, which re-folds kept hops that fall past the run-wide window (one
shard's window can end before another's: the run keeps one window for all).

What a fold loses is per-hop identity: storages, item ids (only their count
stays), the time of each hop between the step's first and last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from flowmap.read.events import Hop, Leaf, SeamStep
from flowmap.trace_format import DETAIL_HOPS as DETAIL_HOPS  # re-exported: the readers' window
from flowmap.writer import HopTally

MIN_SHARD_DETAIL = 10_000  # each shard's share is at least this
# A shard whose window has ended still keeps the hops of the steps inside it
# (a step began before the budget ran out), up to this multiple of its share.
FINISH_STEP_FACTOR = 2


def shard_budget(detail_hops: int | None, num_shards: int) -> int | None:
    """Hops a shard keeps one by one before folding (None: keep every hop)."""
    if detail_hops is None:
        return None
    return max(min(detail_hops, MIN_SHARD_DETAIL), detail_hops // max(1, num_shards))


@dataclass(slots=True)
class Cut:
    """Where a detail window ended: steps after `step`, or unstepped hops after `t_ns`, fold."""

    step: int | None
    t_ns: int

    def past(self, step: int | None, t_ns: int) -> bool:
        if step is not None and self.step is not None:
            return step > self.step
        return t_ns > self.t_ns

    def earlier(self, other: Cut | None) -> Cut:
        if other is None:
            return self
        step = (other.step if self.step is None else self.step if other.step is None
                else min(self.step, other.step))
        return Cut(step, min(self.t_ns, other.t_ns))


def past_window(cut: Cut, step: int | None, t_ns: int, kept: int, keep: int) -> bool:
    """Whether a hop lies past a detail window whose budget of `keep` ran out at `cut`, with
    `kept` hops kept so far: the window ends at the budget's last step (hops of steps up to it
    are still kept, to at most FINISH_STEP_FACTOR times the budget; past that, it ends at the
    budget's time). The reader's rule, and a live watch's over the reader's kept hops."""
    past = step > cut.step if step is not None and cut.step is not None else t_ns > cut.t_ns
    if not past:
        if kept < FINISH_STEP_FACTOR * keep:
            return False
        cut.step = None  # the rest folds; the run folds kept hops past `cut.t_ns`
    return True


class _Cell(HopTally):
    """A seam's hops in one step (times in ns), the schemas they carried, and its record."""

    __slots__ = ("schemas", "made")
    schemas: list[Any]  # schema ids (or leaf tuples), each once
    made: tuple[int, SeamStep] | None  # its record, and its hops when it was made


class SeamStepFolder:
    """Accumulates hops per (src, dst, name, step, transport) of one process.

    Keys are whatever the caller has at hand: a reader passes interned string
    ids and schema ids (no string or `Leaf` is touched per hop), the run
    passes names and leaf tuples; `resolve` and `schema` turn them back.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cells: dict[tuple[Any, Any, Any, int | None, Any], _Cell] = {}
        self.hops = 0

    def add(self, src: Any, dst: Any, name: Any, step: int | None, transport: Any, schema: Any,
            nbytes: int, t_ns: int, items: int, version: int | None, wire: int | None) -> None:
        # Hop fields in the places a hop event has them (`flowmap.trace_format`).
        self.add_event(["h", None, src, dst, name, schema, nbytes, None, step, version, transport,
                        None], t_ns, items, wire)

    def add_event(self, ev: list[Any], t_ns: int, items: int = -1, wire: int | None = None
                  ) -> None:
        """Add a checked hop event (`items` -1: count its item ids). Runs once per folded hop."""
        self.hops += 1
        if items < 0:
            items = len(ev[11]) if ev[11] else 0
        key = (ev[2], ev[3], ev[4], ev[8], ev[10])
        c = self.cells.get(key)
        schema = ev[5]
        if c is None:
            c = self.cells[key] = _Cell(ev[6], t_ns, items, ev[9], wire)
            c.schemas, c.made = [schema], None
            return
        c.add(ev[6], t_ns, items, ev[9], wire)
        seen = c.schemas
        if seen[-1] is not schema and schema not in seen:
            seen.append(schema)

    def add_hop(self, h: Hop) -> None:
        self.add(h.src, h.dst, h.name, h.step, h.transport, h.leaves, h.nbytes, h.t_ns,
                 len(h.items), h.version, h.wire_bytes)

    def seam_steps(self, resolve: Callable[[Any], str],
                   schema: Callable[[Any], tuple[Leaf, ...]]) -> list[SeamStep]:
        """Each cell's record, sorted by time. A cell's record is made again only once it
        took hops (a cell only grows): a live read's snapshot of a long run remakes the
        newest steps' records, not every step's (`resolve` and `schema` stay the same)."""
        out = []
        for (src, dst, name, step, transport), c in self.cells.items():
            if c.made is None or c.made[0] != c.hops:
                c.made = (c.hops, SeamStep(
                    t_ns=c.t_last, t_first_ns=c.t_first, pid=self.pid, src=resolve(src),
                    dst=resolve(dst), name=resolve(name), step=step, transport=resolve(transport),
                    hops=c.hops, nbytes_sum=c.nbytes_sum, nbytes_min=c.nbytes_min,
                    nbytes_max=c.nbytes_max, wire_bytes_sum=c.wire_bytes_sum,
                    num_items=c.num_items, version_min=c.version_min, version_max=c.version_max,
                    leaves=merge_schemas([schema(s) for s in c.schemas]),
                ))
            out.append(c.made[1])
        out.sort(key=lambda s: s.t_ns)
        return out


def fold_hops(hops: Iterable[Hop]) -> list[SeamStep]:
    """`SeamStep`s of `hops` (of any processes), sorted by their last hop's time."""
    folders: dict[int, SeamStepFolder] = {}
    for h in hops:
        f = folders.get(h.pid)
        if f is None:
            f = folders[h.pid] = SeamStepFolder(h.pid)
        f.add_hop(h)
    out = [s for f in folders.values() for s in f.seam_steps(str, same_leaves)]
    out.sort(key=lambda s: s.t_ns)
    return out


def same_leaves(leaves: tuple[Leaf, ...]) -> tuple[Leaf, ...]:
    return leaves


def merge_schemas(schemas: list[tuple[Leaf, ...]]) -> tuple[Leaf, ...]:
    """One schema for all of `schemas`: per path, dims that varied as [min, max], largest bytes."""
    if len(schemas) == 1:
        return schemas[0]
    merged: dict[str, Leaf] = {}
    for leaves in schemas:
        for leaf in leaves:
            cur = merged.get(leaf.path)
            if cur is None:
                merged[leaf.path] = Leaf(leaf.path, leaf.kind, leaf.shape, leaf.dtype, leaf.device,
                                         leaf.nbytes, leaf.count, leaf.dims)
                continue
            cur.shape = shape_range(cur.shape, leaf.shape)
            cur.nbytes = max(cur.nbytes, leaf.nbytes)
            cur.count = max(cur.count, leaf.count)
            if cur.kind != leaf.kind:
                cur.kind = "mixed"
            if cur.dims is None:
                cur.dims = leaf.dims
    return tuple(merged.values())


def _span(d: Any) -> tuple[int, int]:
    return (d[0], d[1]) if isinstance(d, (list, tuple)) else (d, d)


def shape_range(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    """The dims of `a` and `b` together: equal dims stay, others become (min, max)."""
    if a == b:
        return a
    if len(a) != len(b):
        return ()
    out: list[Any] = []
    for x, y in zip(a, b):
        (lx, hx), (ly, hy) = _span(x), _span(y)
        lo, hi = min(lx, ly), max(hx, hy)
        out.append(lo if lo == hi else (lo, hi))
    return tuple(out)


def merge_seam_steps(a: SeamStep, b: SeamStep) -> SeamStep:
    """The record of `a`'s hops and `b`'s (one seam, process and transport; `step` the least)."""
    return SeamStep(
        t_ns=max(a.t_ns, b.t_ns), t_first_ns=min(a.t_first_ns, b.t_first_ns), pid=a.pid,
        src=a.src, dst=a.dst, name=a.name,
        step=a.step if a.step == b.step else min(a.step, b.step),  # type: ignore[type-var]
        transport=a.transport, hops=a.hops + b.hops, nbytes_sum=a.nbytes_sum + b.nbytes_sum,
        nbytes_min=min(a.nbytes_min, b.nbytes_min), nbytes_max=max(a.nbytes_max, b.nbytes_max),
        wire_bytes_sum=None if a.wire_bytes_sum is None and b.wire_bytes_sum is None
        else (a.wire_bytes_sum or 0) + (b.wire_bytes_sum or 0),
        num_items=a.num_items + b.num_items,
        version_min=_least(a.version_min, b.version_min),
        version_max=_largest(a.version_max, b.version_max),
        leaves=a.leaves if a.leaves is b.leaves or a.leaves == b.leaves
        else merge_schemas([a.leaves, b.leaves]),
    )


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _largest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
