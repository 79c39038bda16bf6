"""Plain text for terminals and CI logs: aligned, no colour codes, the verdict on the last line."""

from __future__ import annotations

from flowmap.check.diff import SeamDelta
from flowmap.check.result import CheckReport
from flowmap.check.tolerance import fmt_percent
from flowmap.reporters.check_formats.cells import STATUS_WORD, fmt_delta, fmt_ratio, fmt_step


def render_check(report: CheckReport) -> str:
    lines = [_context(report), *([report.detail] if report.detail else []),
             *([f"{report.ended}: the run holds what it recorded until then"] if report.ended else []), ""]
    for r in report.ordered():
        word = STATUS_WORD.get(r.status, r.status)
        if r.status == "ok" and not r.details:
            lines.append(f"{word:<7} {r.title}: {r.summary}")  # one line per passing check
            continue
        lines.append(f"{word:<7} {r.title}")
        lines.append(f"{'':<7} {r.summary}")
        lines += [f"{'':<7} - {d}" for d in r.details]
    if not report.results:
        lines.append("nothing was checked")
    lines += ["", report.headline()]
    return "\n".join(lines) + "\n"


def _context(report: CheckReport) -> str:
    parts = [f"run {report.run}"]
    if report.baseline:
        parts.append(f"baseline {report.baseline} (tolerance {fmt_percent(report.tolerance)})")
    if report.budget:
        parts.append(f"budget {report.budget}")
    return "flowmap check: " + ", ".join(parts)


def render_diff(deltas: list[SeamDelta], a: str, b: str) -> str:
    header = ("seam", "A/step", "B/step", "delta", "ratio")
    rows = [
        (d.label, fmt_step(d, "a"), fmt_step(d, "b"), fmt_delta(d.delta_bytes_per_step), fmt_ratio(d))
        for d in deltas
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [f"flowmap diff: A = {a}", f"              B = {b}", ""]
    lines.append(_row(header, widths))
    for d, row in zip(deltas, rows, strict=True):
        lines.append(_row(row, widths))
        lines += [f"    {c.describe()}" for c in d.notable_leaves()]
        lines += [f"    {n}" for n in d.notes()]
    if not deltas:
        lines.append("no seams in either side")
    return "\n".join(lines) + "\n"


def _row(cells: tuple[str, ...], widths: list[int]) -> str:
    first = cells[0].ljust(widths[0])
    rest = "  ".join(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))
    return f"{first}  {rest}".rstrip()
