"""flowmap: see what flows through your RL training pipeline.

Record, at every hop, the payload's shape, owner, lifetime and byte size;
build the dataflow graph; show it; gate CI on it.

    import flowmap
    with flowmap.owner("driver"):
        flowmap.hop("rollout/0", "ready_buffer", trajectory, items=[traj.id])

When nothing is tracing, every call here is a near-free no-op.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowmap.capture.api import (
    counter,
    current_owner,
    drop,
    hop,
    mark,
    owner,
    seam,
    set_owner,
    step,
)
from flowmap.capture.session import tracing

# `flowmap.read.fold.DETAIL_HOPS`, written out: importing the model here would
# cost every traced child's start-up (tests/unit/test_streaming_read.py keeps them equal)
DETAIL_HOPS = 100_000

if TYPE_CHECKING:
    from flowmap.model.run import Run

__version__ = "0.1.0"

__all__ = [
    "counter",
    "current_owner",
    "drop",
    "hop",
    "is_tracing",
    "load",
    "mark",
    "owner",
    "seam",
    "set_owner",
    "step",
    "tracing",
]


def is_tracing() -> bool:
    """True when this process records hops (lets callers skip building costly payload views)."""
    from flowmap.capture import state

    return state.tracer is not None


def load(path: str, detail_hops: int | None = DETAIL_HOPS) -> Run:
    """Read a run (a run directory or one shard file): hops, seams, owners, counters, items.

    Past `detail_hops` hops (None: never) the rest are folded per seam and
    step; per-seam figures still count every hop (docs/architecture.md).
    """
    from flowmap.model.run import load as _load

    return _load(path, detail_hops)


