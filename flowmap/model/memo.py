"""What a live watch keeps from one rebuild to the next: figures of folded steps that did not change.

A watch rebuilds the model whole at every update, and a long run's folded steps
(`SeamStep`, one per seam, step and process) grow by ten a second while all but
the few still taking hops stay as they were. Records are never changed once made,
and the incremental reader (`flowmap.read.tail`) keeps the record of a step that
took no hops since its last read, so a record seen again is the same step,
unchanged. A `PrefixMemo` keeps, per key, a part computed over the longest run of
records, from the first, that two calls in a row found the same (compared by
identity, as the memo holds the records no other object can take an `id`; and
where that fails, by value: a run folds the kept hops that lie past another
process's detail window anew at each read, as equal records), and
computes only the rest: parts are sums, counts, least and largest values, which
two adjacent runs of records add up in, so the figures are exactly those of a
whole computation. One entry per key, replaced at each call: nothing grows with
hops, and a run read once (`flowmap.load`) never builds one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from operator import is_
from typing import Any, Generic, TypeVar

from flowmap.read.events import SeamStep

K = TypeVar("K", bound=Hashable)
P = TypeVar("P")

__all__ = ["HopsMemo", "PrefixMemo", "same_from_first"]


class PrefixMemo(Generic[K, P]):
    """Per key, the part of its time-ordered records that stayed the same, and the rest added."""

    def __init__(self, part: Callable[[Sequence[SeamStep]], P], plus: Callable[[P, P], P],
                 empty: P) -> None:
        self._part, self._plus, self._empty = part, plus, empty
        # key -> (its records last call, how many of them from the first had not changed
        # since the call before, the part over those)
        self._kept: dict[K, tuple[Sequence[SeamStep], int, P]] = {}

    @property
    def kept_records(self) -> int:
        """Records whose part is kept, all keys together (what the next call need not read)."""
        return sum(n for _, n, _ in self._kept.values())

    def parts(self, records: Mapping[K, Sequence[SeamStep]]) -> dict[K, P]:
        """Each key's part over all of `records[key]`: the kept part plus the records past it."""
        out: dict[K, P] = {}
        kept: dict[K, tuple[Sequence[SeamStep], int, P]] = {}
        for key, steps in records.items():
            last, stable, part = self._kept.get(key, ((), 0, self._empty))
            n = same_from_first(last, steps)
            if n < stable:  # a record read before changed (a shard read again): anew
                stable, part = 0, self._empty
            if n > stable:
                part = self._plus(part, self._part(steps[stable:n]))
            kept[key] = (steps, n, part)
            out[key] = self._plus(part, self._part(steps[n:])) if n < len(steps) else part
        self._kept = kept
        return out


class HopsMemo(Generic[P]):
    """A figure of a run's kept hops, computed again only when they are not those of the
    last call: the same objects, or equal (hops joined from message halves are made anew).
    A live watch's kept hops stop changing once its detail window is full."""

    def __init__(self, compute: Callable[[Sequence[Any]], P]) -> None:
        self._compute = compute
        self._last: tuple[Sequence[Any], P] | None = None

    def of(self, hops: Sequence[Any]) -> P:
        if self._last is not None:
            last, value = self._last
            if len(last) == len(hops) and same_from_first(last, hops) == len(hops):
                return value
        value = self._compute(hops)
        self._last = (hops, value)
        return value


def same_from_first(last: Sequence[Any], now: Sequence[Any]) -> int:
    """How many records from the first are the same in both: the same object (compared in
    C), or, for the few that are not, equal in every field."""
    same = list(map(is_, last, now))  # as long as the shorter
    n = 0
    while True:
        try:
            i = same.index(False, n)
        except ValueError:
            return len(same)
        if last[i] != now[i]:
            return i
        n = i + 1
