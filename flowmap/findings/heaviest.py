"""The heaviest seams by bytes moved: where a handle or a narrower payload would pay most.

In-process `ref` hops hand over a Python reference and move nothing, so a
seam is weighed by the bytes it copied or sent (`SeamStats.moved_bytes_per_step`)
and its share is of all bytes moved; a seam that moved nothing, or less than
`MIN_SHARE` of them, is not a finding. Nor is a seam that moves only by
collective (a gradient all-reduce, a broadcast): data parallelism needs that
traffic, and "use a handle" or "send fewer rows" does not apply to it; what can
be said about collectives (too many small ones, one tensor to every rank) is
`chatty`'s and `duplicate`'s. Shares are of all bytes moved, collectives included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowmap.findings.common import HEAVIEST, Finding, per_step
from flowmap.model.format import fmt_leaf_schema, leaf_label

if TYPE_CHECKING:
    from flowmap.model.view import RunView

NUM_HEAVIEST = 3
MIN_SHARE = 0.01


def detect(view: RunView) -> list[Finding]:
    total = sum(s.moved_bytes_per_step for s in view.seams.values())
    moved = {key: s.moved_bytes_per_step for key, s in view.seams.items()
             if set(s.transports) != {"collective"}}
    if total <= 0:
        return []
    out = []
    for key in sorted(moved, key=lambda k: (-moved[k], k))[:NUM_HEAVIEST]:
        s, bps = view.seams[key], moved[key]
        if bps / total < MIN_SHARE:
            continue
        leaf = s.leaves[0] if s.leaves else None
        where = (f"its largest leaf `{leaf_label(s.name, leaf.path)}` ({fmt_leaf_schema(leaf)}) "
                 "is where a handle, a narrower dtype or sending only the rows the receiver reads "
                 "would pay most" if leaf else "check that the receiver needs all of it")
        out.append(Finding(
            HEAVIEST, [s.label], bps,
            f"`{s.label}` moves {per_step(bps)} ({100 * bps / total:.0f}% of all bytes "
            f"moved); {where}.",
        ))
    return out
