"""Padding no mask marks, from values sampled under `flowmap trace --values`.

Two kinds of evidence, for the `[rows, positions, ...]` array leaves of a seam
that share their first two dims (a group):

- **tails**: an integer leaf of the group (ids, experts) whose rows end in runs
  of zeros, and hold something nearly everywhere before them: those positions hold
  nothing, in every leaf of the group (an event flag, `dones`, zero but where an
  episode ends, is no such leaf);
- **lengths**: a Python list of numbers, or an integer vector, beside them, one
  per row, each at most `positions`: the rows' real lengths (`lengths=[412, 97,
  ...]`, `seq_lens [B]`); of several, the one that says most is real.

The padded fraction is the sampled hops' (a list of lengths wins: it is what
the program says); the bytes are every hop's. Without `--values` there is no
such evidence and no finding: metadata cannot tell a zero from a token.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings import value_figures
from flowmap.model.types import ARRAY_KINDS, LeafStats

if TYPE_CHECKING:
    from flowmap.model.types import SeamStats
    from flowmap.model.view import RunView

MIN_FRACTION = 0.05  # zero tails below this share of the positions are no padding worth a line
INT_PREFIXES = ("int", "uint", "long")
SAY = {"tails": "the arrays' zero tails", "lengths": "the list of lengths",
       "values": "the mask's zero tails"}  # how each method read the padding


def padded_bytes(view: RunView, s: SeamStats) -> tuple[float, float, str] | None:
    """(padded bytes per step, the group's bytes per step, evidence) of seam `s`, or None."""
    figures = value_figures.of_seam(view, s)
    if not figures:
        return None
    groups: dict[tuple[int, int], list[LeafStats]] = defaultdict(list)
    for leaf in s.leaves:
        if leaf.kind not in ARRAY_KINDS or len(leaf.shape) < 2:
            continue
        rows, positions = leaf.shape[0], leaf.shape[1]
        if isinstance(rows, int) and isinstance(positions, int) and rows >= 2 and positions >= 2:
            groups[(rows, positions)].append(leaf)
    best: tuple[float, float, str] | None = None
    for (rows, positions), leaves in groups.items():
        got = _lengths(figures, rows, positions)
        if got is None:
            got = _tails(figures, leaves)
        if got is None or got[0] < MIN_FRACTION:
            continue
        group_bps = sum(leaf.total_bytes for leaf in leaves) / view.num_steps
        if best is None or group_bps * got[0] > best[0]:
            best = (group_bps * got[0], group_bps, got[1])
    return best


def _lengths(figures: dict[str, value_figures.Figures], rows: int,
             positions: int) -> tuple[float, str] | None:
    best: tuple[float, str] | None = None
    for path, f in sorted(figures.items()):
        # a list of numbers, or an integer vector (its sum is sampled) of lengths, each >= 1
        listed = path.endswith("[*]")
        if (f.sum is not None and f.elements == rows * f.hops
                and (0 if listed else 1) <= f.min and f.max <= positions and f.max >= 1
                and float(f.sum).is_integer()):
            got = 1 - f.sum / (f.hops * rows * positions)
            if best is None or got < best[0]:  # of several (prompt, total): the longest
                best = (got, "lengths")
    return best


def _tails(figures: dict[str, value_figures.Figures],
           leaves: list[LeafStats]) -> tuple[float, str] | None:
    fractions = [fr for leaf in leaves
                 if leaf.dtype.startswith(INT_PREFIXES) and (f := figures.get(leaf.path))
                 and f.max > 0 and f.fills_its_rows and (fr := f.tail_fraction) is not None]
    return (max(fractions), "tails") if fractions else None
