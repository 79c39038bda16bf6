"""A followed shard's counter samples, marks and drops, bounded: the oldest folded, exactly.

A live watch holds a shard for hours; its samples, marks and drops would grow
with it. Past `MAX_RECORDS`, all but the newest half are folded, per name and
owner (reason), into records whose count, sum, least, largest and last value
are exact (`flowmap.read.events.CounterFold` and its kin).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from flowmap.read.events import CounterFold, DropFold, MarkFold, Shard

MAX_RECORDS = 4096  # counter samples (marks, drops) a shard keeps before folding the oldest half


def bound_records(sh: Shard) -> None:
    """Fold all but the newest half-bound of a shard's samples, marks and drops past the bound."""
    if len(sh.counters) > MAX_RECORDS:
        for (name, owner), cs in _cut_oldest(sh.counters, lambda c: (c.name, c.owner)).items():
            vals = [c.value for c in cs]
            sh.counter_folds.append(CounterFold(cs[-1].t_ns, cs[0].t_ns, cs[0].pid, name, owner,
                                                None, len(cs), sum(vals), min(vals), max(vals),
                                                vals[-1]))
    if len(sh.marks) > MAX_RECORDS:
        for (name, owner), ms in _cut_oldest(sh.marks, lambda m: (m.name, m.owner)).items():
            sh.mark_folds.append(MarkFold(ms[-1].t_ns, ms[0].t_ns, ms[0].pid, name, owner, None,
                                          len(ms)))
    if len(sh.drops) > MAX_RECORDS:
        for (owner, reason), ds in _cut_oldest(sh.drops, lambda d: (d.owner, d.reason)).items():
            sh.drop_folds.append(DropFold(ds[-1].t_ns, ds[0].t_ns, ds[0].pid, owner, reason, None,
                                          len(ds), sum(len(x.items) for x in ds)))


def _cut_oldest(records: list[Any], key: Callable[[Any], tuple[str, str]]
                ) -> dict[tuple[str, str], list[Any]]:
    """Take all but the newest half-bound out of `records` (in place), grouped by `key`."""
    cut = len(records) - MAX_RECORDS // 2  # the newest half stays one by one
    old, records[:] = records[:cut], records[cut:]
    by: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for r in old:
        by[key(r)].append(r)
    return by
