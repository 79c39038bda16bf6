"""The heavy seams whose bytes a narrower dtype would halve: float64 leaves sent every step.

A seam being heavy is no reduction by itself: "a handle, a narrower dtype or
fewer rows" names no change and no bytes, so this detector speaks only where
the trace says which change pays and how much. It does for double precision:
float64 payload leaves that were copied or sent (in-process `ref` hops moved
nothing) halve as float32, and nothing in an RL pipeline's seams (logprobs,
advantages, rewards, weights to a sampler) needs more than float32 on the wire.
What flowmap cannot see, it does not claim: whether a float32 weight sync
could go as bfloat16 depends on the receiver's engine, which is not recorded.

Left out: seams that move only by collective (a gradient all-reduce is the
training dtype's, a choice made for the optimiser, not for the seam); a seam
whose every byte fell in one step of several (initial weights: a setup cost,
not a per-step one). Integer ids are `wide_ids`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowmap.findings.common import HEAVIEST, Finding, per_step
from flowmap.model.format import fmt_leaf_schema, leaf_label

if TYPE_CHECKING:
    from flowmap.model.types import LeafStats, SeamStats
    from flowmap.model.view import RunView

WIDE_FLOAT = "float64"
NARROW_FLOAT = "float32"
MAX_NAMED = 2  # leaves named in the message; the rest are counted


def detect(view: RunView) -> list[Finding]:
    out = []
    for s in view.seams.values():
        if set(s.transports) == {"collective"} or s.moved_bytes_per_step <= 0:
            continue
        if view.num_steps > 1 and s.bytes_per_step_max >= s.total_bytes:
            continue  # one step carried all of it: a one-off, not a per-step cost
        wide = [leaf for leaf in s.leaves if leaf.dtypes == (WIDE_FLOAT,)]
        wide_bytes = sum(leaf.total_bytes for leaf in wide)
        if not wide or wide_bytes <= 0 or s.total_bytes <= 0:
            continue
        moved = s.moved_bytes_per_step * min(1.0, wide_bytes / s.total_bytes)
        out.append(Finding(HEAVIEST, [s.label], moved / 2, _message(s, wide, moved)))
    return out


def _message(s: SeamStats, wide: list[LeafStats], moved: float) -> str:
    named = ", ".join(f"`{leaf_label(s.name, leaf.path)}` ({fmt_leaf_schema(leaf)})"
                      for leaf in wide[:MAX_NAMED])
    more = f" and {len(wide) - MAX_NAMED} more" if len(wide) > MAX_NAMED else ""
    return (f"`{s.label}` moves {per_step(moved)} of {WIDE_FLOAT} leaves ({named}{more}): sent "
            f"as {NARROW_FLOAT}, unless the receiver needs double precision, they take "
            f"{per_step(moved / 2)}.")
