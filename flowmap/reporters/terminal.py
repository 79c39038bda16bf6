"""The terminal report: what to fix first, then the seams heaviest first, sized to the terminal.

Like `memray stats` and `py-spy top` it fits a screen: a short summary (the
run, its health, the top findings with the bytes at stake per step), then the
heaviest seams — truncated (`--top N`, `--all`) — then owners and counters.
Lines are laid out by `flowmap.reporters.columns`, so at any width (80 in a
piped CI log) a line never exceeds the width and a figure never wraps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from flowmap.findings import Finding
from flowmap.findings import findings as detect_findings
from flowmap.model.format import fmt_bytes, fmt_leaf_schema, fmt_per_step, fmt_steps
from flowmap.model.types import CounterStats, OwnerStats, SeamStats
from flowmap.model.view import RunView
from flowmap.read.plain import clean_text
from flowmap.reporters.columns import Column, fit_table, shorten, shorten_parts, wrap, wrap_parts
from flowmap.units import fmt_count, plural

TOP_SEAMS = 15  # default rows of the seam table: what fits one screen next to the findings
TOP_FINDINGS = 5
WIDE = 120  # at this width and above, the owners table shows roles too
MAX_PROBLEMS = 20  # capture problems listed under the health line


@dataclass(frozen=True, slots=True)
class TerminalOptions:
    """The width to fit, and how many seams and findings to show (None: every one)."""

    width: int = 80
    top: int | None = TOP_SEAMS
    findings: int | None = TOP_FINDINGS


def report(view: RunView, options: TerminalOptions) -> list[tuple[str, str]]:
    """The report as `(line, rich style)` pairs, every line at most `options.width` cells."""
    return report_lines(view, options.width, top=options.top, findings=options.findings)


def print_report(view: RunView, console: Console | None = None, *, top: int | None = TOP_SEAMS,
                 findings: int | None = TOP_FINDINGS) -> None:
    """Print the report at the console's width; `top`/`findings` None shows every row."""
    console = console or Console()
    print_lines(console, report(view, TerminalOptions(console.width, top, findings)))


def print_lines(console: Console, lines: list[tuple[str, str]]) -> None:
    """Print the report's `(line, rich style)` pairs as they are: never wrapped or cut."""
    for line, style in lines:
        console.print(Text(line, style=style), no_wrap=True, overflow="ignore", crop=False,
                      highlight=False)


def report_lines(view: RunView, width: int, *, top: int | None = TOP_SEAMS,
                 findings: int | None = TOP_FINDINGS) -> list[tuple[str, str]]:
    """The report as `(line, rich style)` pairs, every line at most `width` cells."""
    width = max(width, 40)
    out: list[tuple[str, str]] = []
    out += _summary(view, width)
    out += _findings(detect_findings(view), width, findings, view.has_steps)
    out += _seams(view, width, top)
    out += _owners(list(view.owners.values()), width)
    if view.counters:
        out += _counters(list(view.counters.values()), width)
    path = clean_text(view.path)
    out.append(("", ""))
    out += [(line, "dim") for line in next_commands(path, width)]
    return out


def next_commands(path: str, width: int) -> list[str]:
    """The next commands, never cut (a hint cut in the middle could not be pasted): one a
    line, or, too long for the width, folded with shell line continuations (a backslash
    at the end of a line, the rest from the next line's first column: bash reads it whole,
    even inside the path)."""
    both = f"flowmap report {path} --all | --json"
    commands = [both] if cell_len(both) + 6 <= width else \
        [f"flowmap report {path} --all", f"flowmap report {path} --json"]
    commands.append(f"flowmap render {path} --html")
    out: list[str] = []
    for i, command in enumerate(commands):
        out += _continued(("more: " if i == 0 else "      ") + command, max(width, 20))
    return out


def _continued(text: str, width: int) -> list[str]:
    lines = []
    while cell_len(text) > width:
        cut = width - 1
        space = text.rfind(" ", 6, cut)
        at = space + 1 if space > 0 else cut
        lines.append(text[:at] + "\\")
        text = text[at:]
    return lines + [text]


def _summary(view: RunView, width: int) -> list[tuple[str, str]]:
    lines = [(shorten(f"flowmap report  {clean_text(view.path)}", width), "bold")]
    stepped = view.has_steps
    steps = fmt_steps(view.step_count) + (f" ({view.steps_from})" if view.steps_from else "")
    facts = [steps, plural(view.num_hops, "hop"),
             plural(len(view.seams), "seam"), plural(len(view.owners), "owner"),
             f"{fmt_per_step(view.totals.bytes_per_step_mean, stepped)} payload",
             _moved(view, stepped), f"{view.wall_s:.1f} s"]
    lines += [(ln, "") for ln in wrap(" · ".join(facts), width)]
    if view.draws_flow:  # a script's stages in the order data moved, as the pictures draw them
        lines += [(ln, "bold") for ln in wrap(f"flow: {view.flow.order_text()}", width)]
    elif not view.num_hops and view.watched_stages:  # stopped while its first step was watched
        lines += [(ln, "bold") for ln in wrap(f"seen in the first step (watched, not recorded): "
                                              f"{' → '.join(view.watched_stages)}", width)]
    if view.projection:
        lines += [(ln, "bold magenta") for ln in wrap(f"PROJECTION {view.projection.note}", width)]
    hosts = _hosts(view)
    if hosts:
        lines += [(ln, "") for ln in wrap(hosts, width)]
    health, style = _health(view)
    lines += [(ln, style) for ln in wrap(health, width)]
    if view.detail.folded:
        lines += [(ln, "yellow") for ln in wrap(view.detail.note, width)]
    for problem in view.health.problems[:MAX_PROBLEMS]:  # the JSON has them all, whole
        lines += [(ln, "yellow") for ln in wrap(f"capture: {shorten(problem, 200)}", width)]
    if view.items.total or view.items.dropped_total:  # a script with no item ids: nothing to say
        lines += [(ln, "") for ln in wrap(_items(view), width)]
    return lines


MAX_PIDS = 6  # pids named per host (the JSON lists every process)


def _hosts(view: RunView) -> str:
    """`hosts: a (pids 1, 7), b (pid 1)` where the run spans several hosts or Ray nodes."""
    procs = view.health.processes
    nodes = {p.ray_node for p in procs if p.ray_node}
    if len(view.health.hosts) < 2 and len(nodes) < 2:
        return ""
    parts = []
    for host in view.health.hosts:
        here = [p for p in procs if p.host == host]
        pids = ", ".join(str(p.os_pid) for p in here[:MAX_PIDS]) + (
            f" +{len(here) - MAX_PIDS}" if len(here) > MAX_PIDS else "")
        on = sorted({p.ray_node[:8] for p in here if p.ray_node})
        parts.append(f"{host} ({'pids' if len(here) > 1 else 'pid'} {pids}"
                     + (f"; Ray {'nodes' if len(on) > 1 else 'node'} {', '.join(on)}" if on else "")
                     + ")")
    return "hosts: " + ", ".join(parts)


def _moved(view: RunView, stepped: bool) -> str:
    """What crossed a copy, a process or a wire, in words: a reference handed over in one
    process moves nothing."""
    moved = view.totals.moved_bytes_per_step_mean
    if not moved:
        return "all handed over by reference (nothing copied)"
    return f"{fmt_per_step(moved, stepped)} copied or sent"


def _health(view: RunView) -> tuple[str, str]:
    h = view.health
    counts = (f"{plural(h.shards, 'shard')}, {plural(h.events, 'event')}, "
              f"{plural(h.tracer_errors, 'tracer error')}")
    problems = []
    ended = view.ending.sentence
    if view.ending.failed:  # first: every figure below stops where the program did
        problems.append(f"{ended}; the figures cover what it recorded until then")
    reaped = view.truncated and view.exit_code == 0
    if view.truncated and not reaped:
        problems.append("the run was cut short (a process was killed); showing everything "
                        "recorded before that")
    if h.truncated_shards and not reaped:
        problems.append(f"{plural(len(h.truncated_shards), 'truncated shard')}")
    if h.bad_lines:
        problems.append(f"{plural(h.bad_lines, 'unreadable line')}")
    if h.error_messages:
        problems.append(f"first tracer error: {h.error_messages[0]}")
    if problems or h.tracer_errors or h.problems:
        return f"health: CHECK ({counts}): " + "; ".join(problems), "yellow"
    if reaped:  # Ray and pools kill their workers once the program is done: not a crash
        n = len(h.truncated_shards)
        return (f"health: ok ({counts}); {plural(n, 'worker')} ended without closing "
                f"{'its shard' if n == 1 else 'their shards'} after the program exited 0 "
                "(reaped, as Ray does): every event recorded is kept", "green")
    return f"health: ok ({counts})" + (f"; {ended}" if ended else ""), "green"


def _items(view: RunView) -> str:
    i = view.items
    reasons = ", ".join(f"{n:,} {r}" for r, n in i.dropped.items())
    where = " in the detail window" if view.detail.folded else ""
    return (f"items{where}: {i.total:,} total, {i.consumed:,} consumed, "
            f"{i.dropped_total:,} dropped" + (f" ({reasons})" if reasons else ""))


def _heading(title: str, shown: int, total: int, more: str, width: int) -> list[tuple[str, str]]:
    note = f" ({shown} of {total}; {more})" if shown < total else ""
    return [("", ""), (shorten(title + note, width), "bold")]


def _findings(found: Sequence[Finding], width: int, limit: int | None,
              stepped: bool = True) -> list[tuple[str, str]]:
    if not found:
        return [("", ""), ("Findings: none — no seam stands out", "bold")]
    shown = list(found if limit is None else found[:limit])
    out = _heading("Findings, most bytes at stake " + ("per step" if stepped else "in total")
                   + " first", len(shown), len(found), "--all shows every one", width)
    figures = [fmt_per_step(f.bytes_per_step, stepped) for f in shown]
    fig_w = max(len(s) for s in figures)
    indent = fig_w + 4
    for f, fig in zip(shown, figures, strict=True):
        kind = f.kind.replace("_", "-")
        if indent + 20 > width:  # too narrow for a hanging indent: the message goes below
            out.append((f"  {fig}  {kind}", "bold"))
            out += [("    " + ln, "") for ln in wrap(f.message, width - 4)]
            continue
        body = wrap(f"[{kind}] {f.message}", width - indent)
        out.append((f"  {fig:>{fig_w}}  {body[0]}", ""))
        out += [(" " * indent + ln, "") for ln in body[1:]]
    return out


def _largest_leaf(s: SeamStats) -> str:
    if not s.leaves:
        return ""
    leaf = s.leaves[0]
    more = f" +{len(s.leaves) - 1}" if len(s.leaves) > 1 else ""
    return f"{leaf.path or s.name} {fmt_leaf_schema(leaf)}{more}"


def _transports(s: SeamStats) -> str:
    return " ".join(f"{k}×{v}" for k, v in s.transports.items())


_SEAM_COLUMNS = (
    Column("seam", lambda s: f"{s.src} → {s.dst} : {s.name}", 0, right=False, flexible=True,
           min_width=40, fit=lambda s, w: shorten_parts((s.src, s.dst, s.name), (" → ", " : "), w),
           wrap=lambda s, w: wrap_parts((s.src, s.dst, s.name), (" → ", " : "), w)),
    Column("hops", lambda s: f"{s.hops:,}", 2),
    Column("total", lambda s: fmt_bytes(s.total_bytes), 4),
    Column("per step", lambda s: fmt_bytes(s.bytes_per_step_mean), 1),
    Column("p50/hop", lambda s: fmt_bytes(s.p50_bytes), 5),
    Column("max/hop", lambda s: fmt_bytes(s.max_bytes), 6),
    Column("transport", _transports, 3, right=False),
    Column("largest leaf", _largest_leaf, 7, right=False, flexible=True, min_width=24),
)


def _seams(view: RunView, width: int, top: int | None) -> list[tuple[str, str]]:
    seams = list(view.seams.values())
    if not seams:
        return [("", ""), ("Seams: none recorded", "bold")]
    shown = seams if top is None else seams[:top]
    out = _heading("Seams, heaviest first", len(shown), len(seams), "--top N or --all for more",
                   width)
    columns = _SEAM_COLUMNS if view.has_steps else \
        tuple(c for c in _SEAM_COLUMNS if c.title != "per step")  # a total per step is the total
    table = fit_table(columns, shown, width)
    out.append((table[0], "dim"))
    out += [(ln, "") for ln in table[1:]]
    return out


def _owners(owners: Sequence[OwnerStats], width: int) -> list[tuple[str, str]]:
    cols = [
        Column("owner", lambda o: o.name, 0, right=False, flexible=True, min_width=12),
        # whole-run figures, where the seams above are per step: the unit is in every title
        Column("bytes in/run", lambda o: fmt_bytes(o.bytes_in), 1),
        Column("bytes out/run", lambda o: fmt_bytes(o.bytes_out), 1),
        Column("hops in/run", lambda o: f"{o.hops_in:,}", 2),
        Column("hops out/run", lambda o: f"{o.hops_out:,}", 2),
    ]
    if width >= WIDE:
        cols.insert(1, Column("role", lambda o: o.role, 3, right=False))
    table = fit_table(cols, owners, width)
    return [("", ""), ("Owners, totals over the whole run", "bold"), (table[0], "dim")] + [(ln, "") for ln in table[1:]]


def _counters(counters: Sequence[CounterStats], width: int) -> list[tuple[str, str]]:
    cols = [
        Column("counter", lambda c: c.name, 0, right=False, flexible=True, min_width=12),
        Column("count", lambda c: f"{c.count:,}", 1),
        Column("min", lambda c: fmt_count(c.min), 3),
        Column("mean", lambda c: fmt_count(c.mean), 2),
        Column("max", lambda c: fmt_count(c.max), 3),
        Column("last", lambda c: fmt_count(c.last), 1),
    ]
    table = fit_table(cols, counters, width)
    return [("", ""), ("Counters", "bold"), (table[0], "dim")] + [(ln, "") for ln in table[1:]]
