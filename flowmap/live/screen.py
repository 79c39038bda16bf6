"""What `flowmap top` draws: one rich renderable from one `Frame`.

Kept apart from the loop (`flowmap.live.top`) so that `--once`, the
screenshot script and the tests draw the very same screen.
"""

from __future__ import annotations

import os
import time
from collections import Counter

from rich.cells import cell_len, set_cell_size
from rich.console import Group, RenderableType
from rich.text import Text

from flowmap.live.status import CUT_SHORT, EXITED
from flowmap.live.watch import Frame
from flowmap.model.types import Process, SeamKey, SeamStats
from flowmap.reporters.columns import shorten_parts
from flowmap.units import fmt_bytes, fmt_count

SORTS = {"t": "total", "r": "rate", "h": "hops"}
# Counters a run's health line shows where the run has them (the built-in trainer's names,
# and the names verl and TRL users give the same quantities).
HEALTH_COUNTERS = (
    ("in_flight", "in flight"), ("ready_buffer_depth", "ready buffer"),
    ("target_watermark", "watermark"), ("staleness_max", "staleness max"),
    ("stale_dropped", "stale dropped"), ("groups_dropped_stale", "groups dropped stale"),
)
MAX_FINDINGS = 3


def screen(frame: Frame, *, sort: str = "rate", rows: int = 15, paused: bool = False,
           width: int = 120) -> RenderableType:
    """The whole screen for `frame`: title, health, seams table, findings, keys."""
    return Group(_title(frame, paused), _health(frame), _keys(sort), _seams(frame, sort, rows, width),
                 _findings(frame))


def _title(frame: Frame, paused: bool) -> Text:
    run = frame.run
    name = os.path.basename(os.path.normpath(run.path)) or run.path
    t = Text.assemble(("flowmap top", "bold"), f"  {name}  ")
    if frame.gone:
        t.append(frame.gone + "; this is the last screen", style="bold red")
    elif frame.status.state == CUT_SHORT:
        t.append(frame.status.sentence, style="bold red")
    elif frame.status.state == EXITED:
        t.append(frame.status.sentence + "; this is the last screen", style="bold yellow")
    else:  # running, waiting for a first event, or reading a large run so far
        t.append(frame.status.sentence, style="bold green" if frame.run.shards and not frame.behind
                 else "bold yellow")
    if paused:
        t.append("  [paused]", style="bold magenta")
    ago = max(0.0, time.time() - frame.updated_s)
    t.append(f"  updated {ago:.1f} s ago", style="dim")
    return t


def _health(frame: Frame) -> Text:
    run = frame.run
    h = run.health
    parts = [f"{len(run.shards)} processes traced{_on_hosts(h.processes)}",
             f"{run.step_count} steps", f"{fmt_count(run.num_hops)} hops"]
    for name, label in HEALTH_COUNTERS:
        c = run.counters.get(name)
        if c is not None:
            parts.append(f"{label} {c.last:g}")
    parts.append(f"tracer errors {h.tracer_errors}")
    if h.bad_lines:
        parts.append(f"bad lines {h.bad_lines}")
    style = "yellow" if h.tracer_errors or h.bad_lines or h.problems else ""
    return Text("health: " + " · ".join(parts), style=style)


def _on_hosts(processes: tuple[Process, ...]) -> str:
    """` on 2 hosts (node-a 3, node-b 2)` where the run spans several hosts, else nothing."""
    per_host = Counter(p.host for p in processes)
    if len(per_host) < 2:
        return ""
    return f" on {len(per_host)} hosts ({', '.join(f'{h} {n}' for h, n in sorted(per_host.items()))})"


def ranked(frame: Frame, sort: str) -> list[SeamStats]:
    """Seams in the order asked: by bytes/s over the recent window, total bytes or hops/s."""
    seams = list(frame.run.seams.values())
    rates = frame.rates

    def rate(s: SeamStats, i: int) -> float:
        return rates.get(s.key, (0.0, 0.0))[i]

    if sort == "total":
        return seams  # already heaviest first
    if sort == "hops":
        return sorted(seams, key=lambda s: (-rate(s, 1), -s.hops, s.key))
    return sorted(seams, key=lambda s: (-rate(s, 0), -s.total_bytes, s.key))


_COLUMNS = ("SEAM", "BYTES/S", "HOPS/S", "TOTAL", "HOPS", "P50", "MAX", "TRANSPORT")
_RIGHT = (False, True, True, True, True, True, True, False)  # numbers are right-aligned
_GAP = "  "


def _seams(frame: Frame, sort: str, rows: int, width: int) -> Text:
    """The seams, one line each, in columns laid out here: rich's `Table` measures every
    cell of every column in Python, several milliseconds at each redraw of a small table."""
    seams = ranked(frame, sort)
    lines = [list(_COLUMNS)]
    for s in seams[:rows]:
        bps, hps = frame.rates.get(s.key, (0.0, 0.0))
        lines.append([_label(s.key), fmt_bytes(bps) + "/s", f"{hps:,.1f}", fmt_bytes(s.total_bytes),
                      fmt_count(s.hops), fmt_bytes(s.p50_bytes), fmt_bytes(s.max_bytes),
                      ",".join(s.transports)])
    keep = _fitting([max(map(cell_len, col)) for col in zip(*lines)], width)
    lines = [[row[c] for c in keep] for row in lines]
    right_of = [_RIGHT[c] for c in keep]
    widths = [max(map(cell_len, col)) for col in zip(*lines)]
    # the seam's name gives way first, then the line is cut at the screen's edge
    widths[0] = min(widths[0], max(12, width - sum(widths[1:]) - len(_GAP) * (len(widths) - 1)))
    text = Text(no_wrap=True, overflow="crop")
    for i, cells in enumerate(lines):
        if i:
            text.append("\n")
        parts = []
        for c, (cell, w, right) in enumerate(zip(cells, widths, right_of)):
            if cell_len(cell) > w and c == 0 and i:  # src, dst and name each cut in the middle
                src, _, rest = cell.partition(" -> ")
                dst, _, name = rest.rpartition(" : ")
                cell = shorten_parts((src, dst, name), (" -> ", " : "), w)
            if cell_len(cell) > w:
                cell = set_cell_size(cell, w - 1) + "…"
            pad = " " * (w - cell_len(cell))
            parts.append(pad + cell if right else cell + pad)
        text.append(_GAP.join(parts), style="bold reverse" if i == 0 else "")
    if len(seams) > rows:
        text.append(f"\n{len(seams) - rows} more seams", style="dim italic")
    return text


# Columns a narrow screen leaves out, first to last, so that seams stay told apart by name.
_DROPPABLE = (5, 2, 6)  # P50, HOPS/S, MAX
_SEAM_ROOM = 30


def _fitting(widths: list[int], width: int) -> list[int]:
    """The columns shown: all, or without the least needed while the seam column would be
    narrower than its names need (up to `_SEAM_ROOM`)."""
    keep = list(range(len(widths)))
    need = min(widths[0], _SEAM_ROOM)
    for c in _DROPPABLE:
        room = width - sum(widths[k] for k in keep[1:]) - len(_GAP) * (len(keep) - 1)
        if room >= need:
            break
        keep.remove(c)
    return keep


def _label(key: SeamKey) -> str:
    return f"{key[0]} -> {key[1]} : {key[2]}"


def _findings(frame: Frame) -> Text:
    t = Text("findings so far:", style="bold")
    if not frame.findings:
        t.append(" none yet", style="dim")
    for i, f in enumerate(frame.findings[:MAX_FINDINGS], 1):
        t.append(f"\n {i}. [{f.kind}] {f.message}")
    return t


def _keys(sort: str) -> Text:
    return Text(f"sorted by {sort}  ·  keys: t total · r rate · h hops · p pause · q quit",
                style="dim")
