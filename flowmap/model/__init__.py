"""Model: read traces, merge shards, aggregate seams and owners. Never imports torch."""

from flowmap.model.run import Run, load

__all__ = ["Run", "load"]
