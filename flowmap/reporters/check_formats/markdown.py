"""Markdown for a pull-request comment or a CI step summary (size-limit style: `+X %`)."""

from __future__ import annotations

from flowmap.check.diff import SeamDelta
from flowmap.check.result import CheckReport, Result
from flowmap.check.tolerance import fmt_percent
from flowmap.reporters.check_formats.cells import (
    STATUS_ICON,
    bytes_cell,
    change_cell,
    fmt_delta,
    fmt_ratio,
    fmt_step,
    measured_cell,
)
from flowmap.units import fmt_bytes


def esc(text: str) -> str:
    """Table-cell safe: a `|` (as in a `float32|float64` dtype) would split the cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def render_check(report: CheckReport) -> str:
    icon = "❌" if report.failed else "✅"
    lines = [f"### {icon} {report.headline()}", ""]
    if report.detail:
        lines += [f"_{esc(report.detail)}_", ""]
    if report.ended:
        lines += [f"**{esc(report.ended)}**: the run holds what it recorded until then", ""]
    lines += _findings(report)
    ordered = report.ordered()
    lines += _table(
        f"Seams against `{report.baseline}` (tolerance {fmt_percent(report.tolerance)}):",
        "| | Seam | Baseline | This run | Change | Limit |\n|:-:|:--|--:|--:|--:|--:|",
        [_baseline_row(r) for r in ordered if r.group == "baseline"])
    lines += _table(
        f"Budgets from `{report.budget}`:", "| | Subject | Limit | Measured | |\n|:-:|:--|:--|--:|:--|",
        [_budget_row(r) for r in ordered if r.group == "budget"])
    lines += _details(report)
    return "\n".join(lines).rstrip() + "\n"


MAX_FINDINGS = 10


def _table(title: str, head: str, rows: list[str]) -> list[str]:
    """A titled table and the blank line after it; nothing without rows."""
    return [title, "", *head.split("\n"), *rows, ""] if rows else []


def _findings(report: CheckReport) -> list[str]:
    """Where bytes could be saved, most at stake first: what a reviewer reads before the gate."""
    if not report.findings:
        return []
    lines = ["Findings, most bytes at stake per step first:", "",
             "| At stake | Finding | Seams |", "|--:|:--|:--|"]
    for f in report.findings[:MAX_FINDINGS]:
        seams = "<br>".join(f"`{esc(s)}`" for s in f["seams"])
        lines.append(f"| {fmt_bytes(f['bytes_per_step'])}/step | **{f['kind']}**: "
                     f"{esc(f['message'])} | {seams} |")
    more = len(report.findings) - MAX_FINDINGS
    return lines + (["", f"_{more} more: `flowmap report --all`_"] if more > 0 else []) + [""]


def _baseline_row(r: Result) -> str:
    limit = bytes_cell(r.limit, r.unit) if r.status != "gone" else ""
    return (
        f"| {STATUS_ICON[r.status]} | `{esc(r.subject)}` | {bytes_cell(r.reference, r.unit)} "
        f"| {bytes_cell(r.measured, r.unit)} | {change_cell(r)} | {limit} |"
    )


def _budget_row(r: Result) -> str:
    return (
        f"| {STATUS_ICON[r.status]} | `{esc(r.subject)}` | `{esc(r.check)}` "
        f"| {measured_cell(r)} | {esc(r.summary)} |"
    )


def _details(report: CheckReport) -> list[str]:
    """What changed inside the seams: the leaf sentences, failures first."""
    out = []
    for r in report.ordered():
        if r.status == "ok" or not r.details:
            continue
        out.append(f"- {STATUS_ICON[r.status]} `{r.title}`")
        out += [f"  - `{d}`" for d in r.details]
    if out:
        out = ["<details open><summary>What changed</summary>", "", *out, "", "</details>"]
    return out


def render_diff(deltas: list[SeamDelta], a: str, b: str) -> str:
    lines = [
        f"### flowmap diff: `{a}` → `{b}`", "",
        "| Seam | A / step | B / step | Δ / step | B / A |",
        "|:--|--:|--:|--:|--:|",
    ]
    for d in deltas:
        lines.append(
            f"| `{esc(d.label)}` | {fmt_step(d, 'a')} | {fmt_step(d, 'b')} "
            f"| {fmt_delta(d.delta_bytes_per_step)} | {fmt_ratio(d)} |"
        )
    changed = [d for d in deltas if d.notable_leaves() or d.notes()]
    if changed:
        lines += ["", "Leaf-level differences:", ""]
        for d in changed:
            lines.append(f"- `{d.label}`")
            lines += [f"  - `{c.describe()}`" for c in d.notable_leaves()]
            lines += [f"  - {n}" for n in d.notes()]
    return "\n".join(lines) + "\n"
