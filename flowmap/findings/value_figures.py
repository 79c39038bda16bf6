"""The value figures `flowmap trace --values` sampled, by seam and leaf path.

Only runs traced with `--values` have them (flowmap/capture/values.py); a
finding that uses them says so. A sender's figures are keyed to the seam its
messages joined (`dst` is `(untraced)` on a send half, as for leaf notes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flowmap.read.halves import UNTRACED

if TYPE_CHECKING:
    from flowmap.model.types import SeamStats
    from flowmap.model.view import RunView


FILLED_SHARE = 0.9  # of the positions before a row's zero tail, held by ids or a mask


@dataclass(slots=True)
class Figures:
    """One leaf's sampled figures, merged over the hops sampled."""

    min: float
    max: float
    sum: float | None
    zero_tail: int | None
    elements: int
    hops: int = 1
    filled: int | None = None

    @property
    def fills_its_rows(self) -> bool:
        """Whether the positions before the zero tails hold something, nearly all of them
        (ids, a length mask), not a few (an event flag: `dones`); unknown counts as so."""
        if self.filled is None or self.zero_tail is None:
            return True
        return self.filled >= FILLED_SHARE * (self.elements - self.zero_tail)

    @property
    def tail_fraction(self) -> float | None:
        if self.zero_tail is None or not self.elements:
            return None
        return self.zero_tail / self.elements


def of_seam(view: RunView, s: SeamStats) -> dict[str, Figures]:
    """Leaf path -> its figures on seam `s`; {} when the run was not traced with --values."""
    out: dict[str, Figures] = {}
    for sh in view.events.shards:
        for v in sh.values:
            if v.src != s.src or v.name != s.name or v.dst not in (s.dst, UNTRACED):
                continue
            f = out.get(v.path)
            if f is None:
                out[v.path] = Figures(v.min, v.max, v.sum, v.zero_tail, v.elements,
                                      filled=v.filled)
                continue
            f.min, f.max = min(f.min, v.min), max(f.max, v.max)
            f.sum = None if f.sum is None or v.sum is None else f.sum + v.sum
            f.zero_tail = (None if f.zero_tail is None or v.zero_tail is None
                           else f.zero_tail + v.zero_tail)
            f.elements += v.elements
            f.filled = None if f.filled is None or v.filled is None else f.filled + v.filled
            f.hops += 1
    return out


def sampled(view: RunView) -> bool:
    return any(sh.values for sh in view.events.shards)
