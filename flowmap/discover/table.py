"""The ranked table `flowmap discover` prints: what it found, and what it could not name."""

from __future__ import annotations

from flowmap.discover.candidates import Candidate, Discovery
from flowmap.discover.seammap import suggest_owner
from flowmap.model.format import fmt_steps
from flowmap.units import fmt_bytes

MAX_LEAVES_SHOWN = 4


def _leaves(c: Candidate) -> str:
    names = c.tensor_leaves
    shown = ", ".join(names[:MAX_LEAVES_SHOWN])
    more = len(names) - MAX_LEAVES_SHOWN
    return f"{shown}, +{more}" if more > 0 else shown


def _row(c: Candidate, target: str) -> list[str]:
    per_call = f"{fmt_bytes(c.bytes_in_per_call)} / {fmt_bytes(c.bytes_out_per_call)}"
    return [target, str(c.calls), fmt_bytes(c.fn.bytes_per_step), per_call,
            str(len(c.tensor_leaves)), suggest_owner(c), _leaves(c)]


def _format(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


def render(d: Discovery) -> str:
    # without steps, a "per step" figure is the total over what was watched: say so
    head = ["target", "calls", "bytes/step" if d.steps else "bytes total",
            "bytes/call in / out", "leaves", "owner", "tensor leaves"]
    lines = [f"flowmap: discover: watched {d.watched_calls} calls in {d.processes} "
             f"process(es), {fmt_steps(d.steps)}"
             + (f"; stopped: {', '.join(d.stop_reasons)}" if d.stop_reasons else "")]
    if d.seams:
        lines += _format([head] + [_row(c, c.fn.target or "") for c in d.seams])
    for c in d.seams:
        if c.folded:
            folded = ", ".join(f"{k} ({n})" for k, n in c.folded.most_common(3))
            lines.append(f"  {c.fn.target} folds in: {folded}")
        for key, why in sorted(c.helpers.items()):
            lines.append(f"not a seam: {key}: {why}")
    for c in d.unnamed:
        lines.append(f"not a target: {c.fn.key} ({c.calls} calls, "
                     f"{fmt_bytes(c.bytes_in_per_call + c.bytes_out_per_call)}/call): "
                     f"{c.fn.why_not}")
    for c in d.sinks:
        lines.append(f"left out: {c.fn.key} ({c.calls} calls): {c.fn.sink}")
    if d.below_min_bytes:
        lines.append(f"{d.below_min_bytes} candidate(s) below --min-bytes left out")
    return "\n".join(lines) + "\n"
