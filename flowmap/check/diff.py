"""Seam-by-seam and leaf-by-leaf differences between two snapshots, in words.

The one comparison engine: `flowmap diff` shows these deltas as they are;
`flowmap check` (compare.py) judges them against a tolerance. Both print the
same sentences, e.g. `batch.advantages float32 -> float64, +100 %`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flowmap.check.snapshot import LeafShot, SeamShot, Snapshot
from flowmap.check.tolerance import fmt_change
from flowmap.model.format import fmt_bytes, fmt_named_schema, fmt_named_shape
from flowmap.model.types import ITEMSIZE


@dataclass(frozen=True, slots=True)
class LeafChange:
    """How one leaf path differs between A (`before`) and B (`after`)."""

    label: str  # `batch.advantages`
    before: LeafShot | None
    after: LeafShot | None

    @property
    def added(self) -> bool:
        return self.before is None

    @property
    def removed(self) -> bool:
        return self.after is None

    @property
    def dtype_changed(self) -> bool:
        return bool(self.before and self.after and self.before.dtype != self.after.dtype)

    @property
    def shape_changed(self) -> bool:
        return bool(self.before and self.after and (self.before.shape, self.before.ranks)
                    != (self.after.shape, self.after.ranks))

    @property
    def dtype_widened(self) -> bool:
        """True when each element got bigger (float32 -> float64), whatever the shape did."""
        return self._dtype_direction() > 0

    @property
    def dtype_narrowed(self) -> bool:
        return self._dtype_direction() < 0

    def _dtype_direction(self) -> int:
        """+1 widened, -1 narrowed, 0 unchanged or same width (int32 -> float32)."""
        if not self.dtype_changed:
            return 0
        assert self.before is not None and self.after is not None
        a, b = ITEMSIZE.get(self.before.dtype), ITEMSIZE.get(self.after.dtype)
        if a is None or b is None:  # unknown dtype names: judge by the bytes
            a, b = self.before.bytes_per_hop, self.after.bytes_per_hop
        return (b > a) - (b < a)

    @property
    def growth(self) -> float:
        """B's bytes per hop over A's (inf for an added leaf, 0 for a removed one)."""
        if self.before is None:
            return float("inf")
        if self.after is None:
            return 0.0
        if self.before.bytes_per_hop == 0:
            return 1.0 if self.after.bytes_per_hop == 0 else float("inf")
        return self.after.bytes_per_hop / self.before.bytes_per_hop

    def describe(self) -> str:
        """One phrase: `batch.tokens int64 [B=8, T=16] -> [B=8, T=32], +100 %`."""
        b, a = self.before, self.after
        if b is None:
            assert a is not None
            return f"{self.label} added: {_schema(a)}, {fmt_bytes(a.bytes_per_hop)}/hop"
        if a is None:
            return f"{self.label} removed (was {_schema(b)}, {fmt_bytes(b.bytes_per_hop)}/hop)"
        parts = []
        if self.dtype_changed:
            parts.append(f"{b.dtype or b.kind} -> {a.dtype or a.kind}")
        if self.shape_changed:
            parts.append(f"{fmt_shape(b)} -> {fmt_shape(a)}")
        if not parts:
            parts.append(f"{fmt_bytes(b.bytes_per_hop)} -> {fmt_bytes(a.bytes_per_hop)} per hop")
        change = fmt_change(b.bytes_per_hop, a.bytes_per_hop)
        return f"{self.label} {' '.join(parts)}, {change}"


def _schema(leaf: LeafShot) -> str:
    if leaf.ranks is not None:
        return f"{leaf.dtype or leaf.kind}{fmt_shape(leaf)}"
    return fmt_named_schema(leaf.dtype or leaf.kind, leaf.shape, leaf.dims)


def fmt_shape(leaf: LeafShot) -> str:
    """`[B=8, T=10..12]`: dims named where the hop named them, ranges for dims that varied;
    `[rank 1..2]` where hops gave the leaf different ranks."""
    if leaf.ranks is not None:
        return f"[rank {leaf.ranks[0]}..{leaf.ranks[1]}]"
    return fmt_named_shape(leaf.shape, leaf.dims)


@dataclass(slots=True)
class SeamDelta:
    """One seam in A and/or B, with its leaf changes."""

    label: str
    before: SeamShot | None
    after: SeamShot | None
    leaves: list[LeafChange] = field(default_factory=list)  # changed leaves only

    @property
    def before_bytes_per_step(self) -> int:
        return self.before.bytes_per_step if self.before else 0

    @property
    def after_bytes_per_step(self) -> int:
        return self.after.bytes_per_step if self.after else 0

    @property
    def delta_bytes_per_step(self) -> int:
        return self.after_bytes_per_step - self.before_bytes_per_step

    @property
    def ratio(self) -> float | None:
        """B / A bytes per step; None for a new seam (nothing to divide by)."""
        if self.before_bytes_per_step == 0:
            return None if self.after_bytes_per_step else 1.0
        return self.after_bytes_per_step / self.before_bytes_per_step

    @property
    def status(self) -> str:
        if self.before is None:
            return "new"
        if self.after is None:
            return "gone"
        return "changed" if self.delta_bytes_per_step or self.leaves else "same"

    def notable_leaves(self, min_change: float = 0.01) -> list[LeafChange]:
        """Leaf changes worth a line: schema changes, or bytes that moved by `min_change` or more.

        An asynchronous run's dynamic dims wobble (`[45..50] -> [44..53]`, -0.5 %);
        listing every such range would bury the change a reader is looking for.
        """
        return [
            c for c in self.leaves
            if c.added or c.removed or c.dtype_changed or abs(c.growth - 1) >= min_change
        ]

    def notes(self) -> list[str]:
        """Seam-level changes that are not leaf changes: hop counts and transports."""
        b, a = self.before, self.after
        if b is None or a is None:
            return []
        out = []
        if b.hops_per_step != a.hops_per_step:
            out.append(f"hops/step {b.hops_per_step:g} -> {a.hops_per_step:g}")
        if b.transports != a.transports:
            out.append(f"transport {'+'.join(b.transports)} -> {'+'.join(a.transports)}")
        return out


def diff_snapshots(a: Snapshot, b: Snapshot) -> list[SeamDelta]:
    """Every seam of A or B, the largest absolute change in bytes per step first."""
    out = []
    for label in sorted(set(a.seams) | set(b.seams)):
        before, after = a.seams.get(label), b.seams.get(label)
        out.append(SeamDelta(label, before, after, leaf_changes(before, after)))
    out.sort(key=lambda d: (-abs(d.delta_bytes_per_step), d.label))
    return out


def leaf_changes(before: SeamShot | None, after: SeamShot | None) -> list[LeafChange]:
    """Leaves added, removed, or whose dtype, shape or size changed, heaviest change first."""
    shot = after or before
    if shot is None or before is None or after is None:
        return []  # a whole new or gone seam: its leaves are not "changes"
    out = []
    for path in sorted(set(before.leaves) | set(after.leaves)):
        lb, la = before.leaves.get(path), after.leaves.get(path)
        if lb is not None and la is not None and _same(lb, la):
            continue
        out.append(LeafChange(shot.leaf_label(path), lb, la))
    out.sort(key=lambda c: (-abs(_bytes(c.after) - _bytes(c.before)), c.label))
    return out


def _same(a: LeafShot, b: LeafShot) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape and a.ranks == b.ranks
            and a.bytes_per_hop == b.bytes_per_hop)


def _bytes(leaf: LeafShot | None) -> int:
    return leaf.bytes_per_hop if leaf else 0


def to_dict(d: SeamDelta) -> dict[str, Any]:
    """The JSON form of a delta (shared by `diff --format json` and `check --format json`)."""
    return {
        "seam": d.label,
        "status": d.status,
        "a_bytes_per_step": d.before_bytes_per_step if d.before else None,
        "b_bytes_per_step": d.after_bytes_per_step if d.after else None,
        "delta_bytes_per_step": d.delta_bytes_per_step,
        "ratio": None if d.ratio is None else round(d.ratio, 4),
        "notes": d.notes(),
        "leaves": [
            {
                "leaf": c.label,
                "change": c.describe(),
                "a_bytes_per_hop": c.before.bytes_per_hop if c.before else None,
                "b_bytes_per_hop": c.after.bytes_per_hop if c.after else None,
                "a_dtype": c.before.dtype if c.before else None,
                "b_dtype": c.after.dtype if c.after else None,
                "a_shape": c.before.shape if c.before else None,
                "b_shape": c.after.shape if c.after else None,
                "a_ranks": c.before.ranks if c.before and c.before.ranks else None,
                "b_ranks": c.after.ranks if c.after and c.after.ranks else None,
            }
            for c in d.leaves
        ],
    }
