"""Cell texts shared by the formats: signed byte deltas, ratios, status words."""

from __future__ import annotations

from flowmap.check.diff import SeamDelta
from flowmap.check.result import Result
from flowmap.check.tolerance import fmt_change
from flowmap.model.format import fmt_bytes

STATUS_WORD = {
    "fail": "FAIL", "warn": "WARN", "new": "new", "improved": "better", "gone": "gone", "ok": "ok",
}
STATUS_ICON = {
    "fail": "❌", "warn": "⚠️", "new": "🆕", "improved": "📉", "gone": "➖", "ok": "✅",
}


def fmt_delta(n: float) -> str:
    """'+1.00 KiB', '-512 B', '0 B'."""
    if n == 0:
        return "0 B"
    return ("+" if n > 0 else "-") + fmt_bytes(abs(n))


def fmt_ratio(d: SeamDelta) -> str:
    """B over A: '2.00x', 'new', 'gone'."""
    if d.before is None:
        return "new"
    if d.after is None:
        return "gone"
    r = d.ratio
    return "new" if r is None else f"{r:.2f}x"


def fmt_step(d: SeamDelta, side: str) -> str:
    shot = d.before if side == "a" else d.after
    return fmt_bytes(shot.bytes_per_step) if shot is not None else "-"


def change_cell(r: Result) -> str:
    """The relative change of a baseline result ('+100 %'), '' for budget lines."""
    if r.group != "baseline" or r.measured is None:
        return ""
    if r.reference is None:
        return "new"
    if r.status == "gone":
        return "gone"
    return fmt_change(r.reference, r.measured)


def bytes_cell(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit.startswith("B/"):
        return f"{fmt_bytes(value)}/{unit[2:]}"
    return f"{value:g}"


def measured_cell(r: Result) -> str:
    if r.measured is None:
        return ""
    if r.check.startswith("max_dropped") and r.limit is not None and r.limit < 1 and r.measured <= 1:
        return f"{r.measured * 100:.1f} %"
    return bytes_cell(r.measured, r.unit)
