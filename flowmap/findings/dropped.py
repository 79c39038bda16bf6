"""Bytes spent carrying items that were later discarded, by drop reason and role.

A hop's bytes are shared evenly among the items it carried; only hops up to
the drop count.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from flowmap.findings.common import DROPPED, Finding, per_step
from flowmap.model.format import seam_label
from flowmap.model.types import ItemId, SeamKey, role_of

if TYPE_CHECKING:
    from flowmap.model.view import RunView

DropKey = tuple[str, str]  # (reason, role where dropped)


def detect(view: RunView) -> list[Finding]:
    first_drop: dict[ItemId, tuple[int, str, str]] = {}  # item -> (t_ns, role, reason)
    for d in view.events.drops:
        for item in d.items:
            first_drop.setdefault(item, (d.t_ns, role_of(d.owner), d.reason))
    if not first_drop:
        return []
    spent: dict[DropKey, float] = defaultdict(float)
    seams: dict[DropKey, set[SeamKey]] = defaultdict(set)
    for h in view.events.hops:
        for item in h.items:
            drop = first_drop.get(item)
            if drop is not None and h.t_ns <= drop[0]:
                spent[(drop[2], drop[1])] += h.nbytes / len(h.items)
                seams[(drop[2], drop[1])].add(h.seam)
    items: defaultdict[DropKey, int] = defaultdict(int)
    for _, owner, reason in first_drop.values():
        items[(reason, owner)] += 1
    out = []
    for (reason, owner), n in sorted(items.items()):
        bps = spent.get((reason, owner), 0.0) / view.detail.num_steps
        share = 100 * n / max(1, view.items.total)
        out.append(Finding(
            DROPPED, sorted(seam_label(k) for k in seams.get((reason, owner), ())), bps,
            f"{n} items ({share:.0f}% of all) were dropped as `{reason}` at {owner} after "
            f"{per_step(bps)} had carried them there: {_advice(reason)}.",
        ))
    return out


def _advice(reason: str) -> str:
    if "stale" in reason.lower() or "off" in reason.lower():
        return ("keep fewer in flight (a lower watermark) or accept more staleness, so less is "
                "generated only to be thrown away")
    return "filter them before the heaviest hop they ride, or produce fewer"
