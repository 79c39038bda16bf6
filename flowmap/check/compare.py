"""Judge a run's snapshot against a baseline: regressions, improvements, new and gone seams.

The rules (docs/ci.md, "What counts as a regression"):

1. a seam's bytes per step above baseline x (1 + tolerance), by at least the
   floor (`--min-bytes`, default 1 KiB/step) — smaller changes are noise: an
   asynchronous pipeline's control seams wobble by tens of percent run to run;
2. a new seam carrying at least the floor;
3. a leaf whose dtype widened (float32 -> float64), at any size: it scales
   with the problem, so a tiny CI run must still catch it;
4. a new array leaf (tensor, ndarray) at any size, a new leaf of another kind
   from the floor up;
5. a leaf whose bytes per hop grew past the tolerance, from the floor up.

A seam that disappeared, a removed leaf, or a seam below baseline x
(1 - tolerance) by at least the floor is reported, never a failure.
"""

from __future__ import annotations

from collections.abc import Callable

from flowmap.check.diff import LeafChange, SeamDelta, diff_snapshots
from flowmap.check.result import Result
from flowmap.check.snapshot import SeamShot, Snapshot
from flowmap.check.tolerance import fmt_change, fmt_percent
from flowmap.model.format import fmt_bytes

DEFAULT_MIN_BYTES_PER_STEP = 1024


def compare(
    current: Snapshot,
    baseline: Snapshot,
    tolerance: float,
    min_bytes_per_step: int = DEFAULT_MIN_BYTES_PER_STEP,
    tolerance_for: Callable[[str, str, str], float | None] | None = None,
) -> list[Result]:
    """One result per seam of either snapshot, largest absolute change first.

    `tolerance_for(src, dst, name)` may give a seam its own tolerance (a budget
    file's per-seam `tolerance`), for seams whose volume follows timing.
    """
    out = []
    for d in diff_snapshots(baseline, current):
        shot = d.after or d.before
        assert shot is not None
        own = tolerance_for(shot.src, shot.dst, shot.name) if tolerance_for else None
        out.append(_judge(d, tolerance if own is None else own, min_bytes_per_step, own is not None))
    return out


def _judge(d: SeamDelta, tol: float, floor: int, own_tolerance: bool = False) -> Result:
    if d.before is None:
        assert d.after is not None
        return _new_seam(d, d.after, floor)
    if d.after is None:
        return Result(
            "baseline", d.label, "gone",
            f"not in this run (baseline: {fmt_bytes(d.before.bytes_per_step)}/step)",
            measured=0, reference=d.before.bytes_per_step, unit="B/step", check="bytes_per_step",
        )
    before, after = d.before.bytes_per_step, d.after.bytes_per_step
    limit = max(before * (1 + tol), before + floor)
    failing = [c for c in d.leaves if _leaf_regressed(c, tol, floor)]
    notable = [c for c in d.leaves if c not in failing and _leaf_notable(c, tol)]
    if after > limit or failing:
        status = "fail"
    elif after < min(before * (1 - tol), before - floor):
        status = "improved"
    else:
        status = "ok"
    summary = (
        f"bytes/step {fmt_bytes(before)} -> {fmt_bytes(after)} ({fmt_change(before, after)}; "
        f"limit {fmt_bytes(limit)}{f', tolerance {fmt_percent(tol)}' if own_tolerance else ''})"
    )
    details = [c.describe() for c in failing + notable]
    if status != "ok":
        details += d.notes()
        if not failing and not notable:
            details.append(
                f"bytes/hop {fmt_bytes(d.before.bytes_per_hop)} -> {fmt_bytes(d.after.bytes_per_hop)}"
            )
    return Result(
        "baseline", d.label, status, summary, details,
        measured=after, reference=before, limit=limit, unit="B/step", check="bytes_per_step",
    )


def _new_seam(d: SeamDelta, after: SeamShot, floor: int) -> Result:
    size = after.bytes_per_step
    over = size >= floor
    summary = (
        f"new seam carrying {fmt_bytes(size)}/step "
        f"({'at or above' if over else 'below'} the {fmt_bytes(floor)}/step floor)"
    )
    heaviest = sorted(after.leaves.values(), key=lambda leaf: (-leaf.bytes_per_hop, leaf.path))[:5]
    details = [LeafChange(after.leaf_label(leaf.path), None, leaf).describe() for leaf in heaviest]
    return Result(
        "baseline", d.label, "fail" if over else "new", summary, details,
        measured=size, reference=None, limit=floor, unit="B/step", check="bytes_per_step",
    )


def _leaf_regressed(c: LeafChange, tol: float, floor: int) -> bool:
    if c.removed:
        return False
    assert c.after is not None
    if c.added:
        return c.after.is_array or c.after.bytes_per_step >= floor
    if c.dtype_widened:
        return True
    assert c.before is not None
    return c.growth > 1 + tol and c.after.bytes_per_step - c.before.bytes_per_step >= floor


def _leaf_notable(c: LeafChange, tol: float) -> bool:
    """Worth a line even when it passes: a schema change, or a size change past the tolerance."""
    if c.added or c.removed or c.dtype_changed:
        return True
    return abs(c.growth - 1) > tol
