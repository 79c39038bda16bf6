"""flowmap: see what flows through your RL training pipeline.

Record, at every hop, the payload's shape, owner, lifetime and byte size;
build the dataflow graph; show it; gate CI on it.

    import flowmap
    with flowmap.owner("driver"):
        flowmap.hop("rollout/0", "ready_buffer", trajectory, items=[traj.id])

When nothing is tracing, every call here is a near-free no-op.
"""

from __future__ import annotations

import os
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
    tag_items,
)
from flowmap.launch.block import tracing


def _source_tree_roots() -> None:
    """In a source checkout, find `flowmap.trainer` and `flowmap.cli` in `trainer/` and `cli/`.

    Installed, they are folders of this package. The checkout keeps them beside it,
    and an editable install maps them there; but a program run from the checkout's
    root imports this folder (the working directory comes first on `sys.path`),
    not the installed copy, even when flowmap is installed regularly. So where
    `trainer/` is not inside this package and sits beside it, the checkout's root
    is searched for this package's subpackages too.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    if not os.path.isdir(os.path.join(here, "trainer")) and all(
            os.path.isfile(os.path.join(root, sub, "__init__.py")) for sub in ("trainer", "cli")):
        __path__.append(root)


_source_tree_roots()

# the reader's detail window, from the format's module: importing the model here would
# cost every traced child's start-up
from flowmap.trace_format import DETAIL_HOPS  # noqa: E402

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
    "tag_items",
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


