"""The heaviest seams: where a handle or a narrower payload would pay most."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowmap.findings.common import HEAVIEST, Finding, per_step
from flowmap.model.format import fmt_schema, leaf_label

if TYPE_CHECKING:
    from flowmap.model.view import RunView

NUM_HEAVIEST = 3


def detect(view: RunView) -> list[Finding]:
    total = sum(s.total_bytes for s in view.seams.values())
    out = []
    for s in list(view.seams.values())[:NUM_HEAVIEST]:
        if not s.total_bytes:
            continue
        share = 100 * s.total_bytes / total
        leaf = s.leaves[0] if s.leaves else None
        where = (f"its largest leaf `{leaf_label(s.name, leaf.path)}` ({fmt_schema(leaf.dtype or leaf.kind, leaf.shape)}) "
                 "is where a handle, a narrower dtype or sending only the rows the receiver reads "
                 "would pay most" if leaf else "check that the receiver needs all of it")
        out.append(Finding(
            HEAVIEST, [s.label], s.bytes_per_step_mean,
            f"`{s.label}` carries {per_step(s.bytes_per_step_mean)} ({share:.0f}% of all bytes "
            f"moved); {where}.",
        ))
    return out
