"""The terminal report: rich tables of seams, owners, counters, items and capture health."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from flowmap.model.findings import Finding
from flowmap.model.format import fmt_bytes, fmt_schema
from flowmap.model.reader import clean_text
from flowmap.model.types import SeamStats
from flowmap.model.view import RunView

MAX_SEAM_ROWS = 40
MAX_FINDING_ROWS = 10


def print_report(view: RunView, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]flowmap report[/bold]  {_escape(clean_text(view.path))}  "
                  f"({view.num_hops} hops, {len(view.seams)} seams, {view.num_steps} steps)",
                  highlight=False, markup=True)
    if view.projection:
        console.print(f"[bold magenta]PROJECTION[/bold magenta] {_escape(view.projection.note)}",
                      highlight=False)
    if view.truncated:
        console.print("[yellow]the run was cut short (a process was killed); "
                      "showing everything recorded before that[/yellow]")
    console.print(_seams_table(view))
    found = view.findings
    if found:
        console.print(_findings_table(found))
    console.print(_owners_table(view))
    if view.counters:
        console.print(_counters_table(view))
    console.print(_items_line(view), highlight=False)
    console.print(_health_line(view), highlight=False)


def _shapes(s: SeamStats) -> str:
    parts = []
    for leaf in s.leaves[:4]:
        parts.append(f"{leaf.path or '(value)'} {fmt_schema(leaf.dtype or leaf.kind, leaf.shape)}")
    if len(s.leaves) > 4:
        parts.append(f"+{len(s.leaves) - 4} more")
    return "\n".join(parts)


def _seams_table(view: RunView) -> Table:
    t = Table(title="Seams, heaviest first", title_justify="left")
    for col in ("seam", "hops", "total", "per step", "per hop p50", "max", "leaves (dtype[shape])",
                "transport"):
        t.add_column(col, justify="right" if col in ("hops", "total", "per step", "per hop p50",
                                                        "max") else "left", overflow="fold")
    for s in list(view.seams.values())[:MAX_SEAM_ROWS]:
        t.add_row(
            f"{_escape(s.src)} → {_escape(s.dst)}\n[dim]{_escape(s.name)}[/dim]",
            str(s.hops),
            fmt_bytes(s.total_bytes),
            fmt_bytes(s.bytes_per_step_mean),
            fmt_bytes(s.p50_bytes),
            fmt_bytes(s.max_bytes),
            _escape(_shapes(s)),
            ", ".join(f"{k}×{v}" for k, v in s.transports.items()),
        )
    if len(view.seams) > MAX_SEAM_ROWS:
        t.caption = f"{len(view.seams) - MAX_SEAM_ROWS} lighter seams not shown (see --json)"
    return t


def _findings_table(found: Sequence[Finding]) -> Table:
    t = Table(title="Findings, most bytes at stake first", title_justify="left")
    t.add_column("kind")
    t.add_column("per step", justify="right")
    t.add_column("suggestion", overflow="fold")
    for f in found[:MAX_FINDING_ROWS]:
        t.add_row(f.kind.replace("_", "-"), fmt_bytes(f.bytes_per_step), _escape(f.message))
    if len(found) > MAX_FINDING_ROWS:
        t.caption = f"{len(found) - MAX_FINDING_ROWS} more findings (see --json)"
    return t


def _owners_table(view: RunView) -> Table:
    t = Table(title="Owners", title_justify="left")
    for col in ("owner", "role", "bytes in", "bytes out", "hops in", "hops out"):
        t.add_column(col, justify="left" if col in ("owner", "role") else "right")
    for o in view.owners.values():
        t.add_row(_escape(o.name), _escape(o.role), fmt_bytes(o.bytes_in), fmt_bytes(o.bytes_out),
                  str(o.hops_in), str(o.hops_out))
    return t


def _counters_table(view: RunView) -> Table:
    t = Table(title="Counters", title_justify="left")
    for col in ("counter", "count", "min", "mean", "max", "last"):
        t.add_column(col, justify="left" if col == "counter" else "right")
    for c in view.counters.values():
        t.add_row(_escape(c.name), str(c.count), f"{c.min:.4g}", f"{c.mean:.4g}", f"{c.max:.4g}",
                  f"{c.last:.4g}")
    return t


def _items_line(view: RunView) -> str:
    i = view.items
    reasons = ", ".join(f"{n} {r}" for r, n in i.dropped.items())
    return (f"items: {i.total} total, {i.consumed} consumed, {i.dropped_total} dropped"
            + (f" ({reasons})" if reasons else ""))


def _health_line(view: RunView) -> str:
    h = view.health
    line = (f"capture: {h.shards} shard(s), {h.events} events, {h.tracer_errors} tracer errors")
    if h.truncated_shards:
        line += f", {len(h.truncated_shards)} truncated shard(s)"
    if h.error_messages:
        line += f"; first error: {h.error_messages[0]}"
    for problem in h.problems[:20]:
        line += f"\ncapture: {_escape(problem, 1000)}"
    return line


def _escape(text: str, limit: int = 200) -> str:
    """`text` as literal rich text, cut to `limit` characters (the JSON has it whole)."""
    from rich.markup import escape

    return escape(text if len(text) <= limit else text[: limit - 1] + "…")
