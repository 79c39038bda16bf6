"""Model: a run's records (`flowmap.read`) aggregated once into the read model (`Run.view`).

Never imports torch. See docs/architecture.md for the layers and the types.

`Run`, `RunView` and `load` are loaded on first use: the text helpers
(`flowmap.model.format`) and types are imported by outputs and checks that
need no aggregation, and must not pay for the whole model.
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
