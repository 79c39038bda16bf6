"""The arithmetic and the text of bench_peers.py, apart from running anything.

Kept pure so it can be unit-tested without a tracer installed: parsing what the
measuring parent prints, pairing each tool's run with the plain run of its
round, medians, and the markdown block that goes into docs/performance.md as
printed (so the integrator regenerates the section with one command).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

BEGIN_MARK = "<!-- bench_peers: begin -->"
END_MARK = "<!-- bench_peers: end -->"


@dataclass(frozen=True)
class Measure:
    """What one run of the whole process tree cost."""

    wall_s: float
    peak_kib: float  # the largest process's peak RSS
    cpu_s: float  # user + sys of every process of the tree
    unreaped: int = 0  # processes still alive when the measuring parent gave up on them


class MeasureError(ValueError):
    """The measuring parent's output is not a measure of a successful run."""


def parse_measure(stdout: str) -> Measure:
    """Read the measuring parent's last line: `rc wall_s peak_kib cpu_s unreaped`."""
    lines = stdout.strip().splitlines()
    parts = lines[-1].split() if lines else []
    if len(parts) != 5:
        raise MeasureError(f"expected 5 fields from the measuring parent, got {parts!r}")
    rc = int(parts[0])
    if rc != 0:
        raise MeasureError(f"the command exited with status {rc}")
    return Measure(float(parts[1]), float(parts[2]), float(parts[3]), int(parts[4]))


def partner_first(round_index: int) -> bool:
    """Whether a round's untraced partner runs before the tool (even rounds) or after it (odd):
    alternating cancels an effect of the order in the median."""
    return round_index % 2 == 0


def rotated(items: Sequence[T], round_index: int) -> list[T]:
    """The tool order of a round: each round starts one tool later, so none always runs first."""
    if not items:
        return []
    k = round_index % len(items)
    return [*items[k:], *items[:k]]


@dataclass
class Samples:
    """One tool's figures, each a ratio to the plain run of the same round."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak: list[float] = field(default_factory=list)
    trace_bytes: list[int] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)

    def add(self, run: Measure, plain: Measure, trace_bytes: int, processes: int) -> None:
        self.wall.append(run.wall_s / plain.wall_s)
        self.cpu.append(run.cpu_s / plain.cpu_s)
        self.peak.append(run.peak_kib / plain.peak_kib)
        self.trace_bytes.append(trace_bytes)
        self.processes.append(processes)


@dataclass(frozen=True)
class Row:
    """A tool's line of the table: medians over its rounds."""

    tool: str
    wall_ratio: float
    cpu_ratio: float
    peak_ratio: float
    trace_bytes: int
    processes: int
    rounds: int


def summarize(tool: str, samples: Samples) -> Row:
    if not samples.wall:
        raise ValueError(f"{tool} has no rounds to summarize")
    return Row(tool, statistics.median(samples.wall), statistics.median(samples.cpu),
               statistics.median(samples.peak), int(statistics.median(samples.trace_bytes)),
               min(samples.processes), len(samples.wall))


def format_bytes(n: int) -> str:
    """Three significant figures in MB (the table compares sizes 1000× apart)."""
    mb = n / 1e6
    if mb >= 100:
        return f"{mb:.0f} MB"
    if mb >= 10:
        return f"{mb:.1f} MB"
    return f"{mb:.2f} MB"


def _span(values: Sequence[float], fmt: str) -> str:
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def round_line(index: int, rounds: int, plains: Sequence[Measure],
               ratios: Sequence[tuple[str, float, float]]) -> str:
    """One round as it finishes: its plain runs' span, then each tool's wall and CPU ratio."""
    head = (f"round {index + 1}/{rounds}: plain {_span([p.wall_s for p in plains], '.2f')} s, "
            f"{_span([p.cpu_s for p in plains], '.2f')} CPU s, "
            f"{_span([p.peak_kib / 1024 for p in plains], '.0f')} MB")
    return "; ".join([head, *(f"{name} {w:.3f}× wall {c:.3f}× CPU" for name, w, c in ratios)])


def markdown_table(rows: Sequence[Row]) -> str:
    lines = ["| tool | wall time | CPU time (user+sys) | peak memory (largest process) "
             "| trace | processes traced |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.tool} | {r.wall_ratio:.3f}× | {r.cpu_ratio:.3f}× | {r.peak_ratio:.2f}× "
              f"| {format_bytes(r.trace_bytes)} | {r.processes} |" for r in rows]
    return "\n".join(lines)


def doc_block(command: str, context: str, round_lines: Sequence[str], rows: Sequence[Row],
              notes: Sequence[str]) -> str:
    """The section's body as docs/performance.md shows it, between its two markers."""
    parts = [BEGIN_MARK, "", "```bash", command, "```", "", context, "", "```",
             *round_lines, "```", "", markdown_table(rows)]
    if notes:
        parts += ["", *(f"- {n}" for n in notes)]
    parts += ["", END_MARK]
    return "\n".join(parts)


def splice(document: str, block: str) -> str:
    """Replace what lies between the markers (markers included) with `block`."""
    start = document.find(BEGIN_MARK)
    end = document.find(END_MARK)
    if start < 0 or end < start:
        raise ValueError(f"the file has no {BEGIN_MARK} ... {END_MARK} section to replace")
    return document[:start] + block + document[end + len(END_MARK):]
