"""Per item: each item's life through the run, and how long items stay at a seam's end.

Items are the ids a program gives its payloads (`hop(..., items=...)`): a
life is where each was, from its first hop to its last or its drop; a seam's
residency is how long its items stayed at its destination before leaving it.
Both read the kept hops only (folded steps keep no ids).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING

from flowmap.model.sources import ItemSource
from flowmap.model.types import ItemEvent, ItemId, ItemLife, ItemStats, SeamKey
from flowmap.read.events import Drop, Hop

if TYPE_CHECKING:

    from flowmap.read.records import Records

_ITEMS = attrgetter("items")


def residency(run: ItemSource) -> dict[SeamKey, list[float]]:
    """Seconds each item stayed at a seam's destination before leaving it (or being dropped)."""
    arrivals: dict[tuple[ItemId, str], tuple[SeamKey, int]] = {}
    out: dict[SeamKey, list[float]] = defaultdict(list)
    events: list[tuple[int, int, Hop | Drop]] = [
        (h.t_ns, 0, h) for h in compress(run.hops, map(_ITEMS, run.hops))]
    events += [(d.t_ns, 1, d) for d in run.drops if d.items]
    events.sort(key=lambda e: (e[0], e[1]))
    for t, _, ev in events:
        if isinstance(ev, Hop):
            for item in ev.items:
                arrived = arrivals.pop((item, ev.src), None)
                if arrived is not None:
                    out[arrived[0]].append((t - arrived[1]) / 1e9)
                arrivals[(item, ev.dst)] = ((ev.src, ev.dst, ev.name), t)
        else:
            for item in ev.items:
                arrived = arrivals.pop((item, ev.owner), None)
                if arrived is not None:
                    out[arrived[0]].append((t - arrived[1]) / 1e9)
    return out


@dataclass(slots=True)
class _Life:
    born_s: float
    end_s: float
    dropped: str | None
    events: list[ItemEvent]


def item_stats(run: Records) -> ItemStats:
    """Totals, drops by reason, and each item's life."""
    lives: dict[ItemId, _Life] = {}
    for h in compress(run.hops, map(_ITEMS, run.hops)):  # those that carry items
        t = (h.t_ns - run.t0_ns) / 1e9
        for item in h.items:
            life = lives.get(item)
            if life is None:
                life = lives[item] = _Life(t, t, None, [])
            life.events.append((t, h.src, "leave"))
            life.events.append((t, h.dst, "arrive"))
            life.end_s = t
    dropped: Counter[str] = Counter()
    for d in run.drops:
        t = (d.t_ns - run.t0_ns) / 1e9
        for item in d.items:
            life = lives.get(item)
            if life is None:
                life = lives[item] = _Life(t, t, None, [])
            if life.dropped is None:
                dropped[d.reason] += 1
            life.dropped = d.reason
            life.events.append((t, d.owner, "drop"))
            life.end_s = max(life.end_s, t)
    total = len(lives)
    return ItemStats(
        total=total,
        consumed=total - sum(dropped.values()),
        dropped=dict(sorted(dropped.items())),
        lives={k: ItemLife(k, v.born_s, v.end_s, v.dropped, tuple(v.events)) for k, v in lives.items()},
    )
