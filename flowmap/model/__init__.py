"""Model: read traces, merge shards, aggregate once into the read model (`Run.view`).

Never imports torch. See docs/architecture.md for the layers and the types.

`Run`, `RunView` and `load` are loaded on first use: `flowmap trace` reads and
writes `run.json` through `flowmap.read.run_meta` while the user's program
runs, and importing the whole model there would cost every traced run ~20 ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowmap.model.run import Run, load
    from flowmap.model.view import RunView

__all__ = ["Run", "RunView", "load"]


def __getattr__(name: str) -> Any:
    if name in ("Run", "load"):
        from flowmap.model import run

        return getattr(run, name)
    if name == "RunView":
        from flowmap.model.view import RunView

        return RunView
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
