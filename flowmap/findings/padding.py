"""Bytes spent on padding in leaves that ride with a mask of the same leading shape.

The padded fraction comes from a counter the pipeline reports
(`padding/<payload>` or `padding/<payload>/<mask path>`, 0..1), else it is
estimated from the unpadded leaves that carried the same items earlier (see
`flowmap.findings.lengths`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flowmap.findings.common import (
    PADDING,
    Finding,
    RoleKey,
    norm_path,
    per_step,
    role_key,
)
from flowmap.findings.lengths import UnpaddedLengths
from flowmap.model.format import role_label
from flowmap.model.types import ARRAY_KINDS, LeafStats, SeamKey, SeamStats

if TYPE_CHECKING:
    from flowmap.model.view import RunView

MaskGroup = tuple[LeafStats, list[LeafStats]]  # (mask, the leaves it masks, itself included)


@dataclass(slots=True)
class _Padded:
    """One role-level seam's padding, summed over its owner-level seams."""

    bytes_per_step: float = 0.0  # spent on padding
    masked_bytes_per_step: float = 0.0  # of all its masked leaves
    labels: set[str] = field(default_factory=set)
    methods: set[str] = field(default_factory=set)  # "counter", "estimate"


def detect(view: RunView) -> list[Finding]:
    masked: dict[SeamKey, list[MaskGroup]] = {
        key: groups for key, s in view.seams.items() if (groups := _mask_groups(s))}
    if not masked:
        return []
    lengths = UnpaddedLengths(view, set(masked))
    found: dict[RoleKey, _Padded] = {}
    for key, groups in masked.items():
        s = view.seams[key]
        for mask, leaves in groups:
            fraction, method = _counter_fraction(view, s.name, mask.path), "counter"
            if fraction is None:
                fraction, method = lengths.padded_fraction(s, leaves), "estimate"
            if fraction is None:
                continue
            masked_bps = sum(leaf.total_bytes for leaf in leaves) / view.num_steps
            entry = found.setdefault(role_key(key), _Padded())
            entry.bytes_per_step += masked_bps * fraction
            entry.labels.add(s.label)
            entry.masked_bytes_per_step += masked_bps
            entry.methods.add(method)
    out = []
    for rk, p in found.items():
        how = "reported" if p.methods == {"counter"} else "estimated"
        bps = p.bytes_per_step
        pct = 100 * bps / p.masked_bytes_per_step if p.masked_bytes_per_step else 0.0
        out.append(Finding(
            PADDING, sorted(p.labels), bps,
            f"`{role_label(rk)}` spends about {per_step(bps)} on padding ({pct:.0f}% of its masked "
            f"leaves, {how}): pack sequences (cu_seqlens) or pad to the batch's longest, not "
            "a fixed length.",
        ))
    return out


def _is_mask(leaf: LeafStats) -> bool:
    name = norm_path(leaf.path).rsplit(".", 1)[-1].lower()
    return "mask" in name and leaf.kind in ARRAY_KINDS and len(leaf.shape) >= 2


def _mask_groups(s: SeamStats) -> list[MaskGroup]:
    """(mask, the array leaves whose shape starts with the mask's, itself included) per mask."""
    out = []
    taken: set[str] = set()
    for mask in sorted((leaf for leaf in s.leaves if _is_mask(leaf)), key=lambda m: m.path):
        prefix = mask.shape
        leaves = [leaf for leaf in s.leaves if leaf.path not in taken and leaf.kind in ARRAY_KINDS
                  and leaf.shape[: len(prefix)] == prefix]
        taken.update(leaf.path for leaf in leaves)
        out.append((mask, leaves))
    return out


def _counter_fraction(view: RunView, name: str, mask_path: str) -> float | None:
    for counter in (f"padding/{name}/{mask_path}", f"padding/{name}"):
        c = view.counters.get(counter)
        if c is not None:
            return min(1.0, max(0.0, c.mean))
    return None
