"""Model: read traces, merge shards, aggregate once into the read model (`Run.view`).

Never imports torch. See docs/architecture.md for the layers and the types.
"""

from flowmap.model.run import Run, load
from flowmap.model.view import RunView

__all__ = ["Run", "RunView", "load"]
