"""The ready buffer's side of batch assembly: apply the dry run, and steer the watermark.

Each time the trainer can take a batch, the driver asks `try_assemble`. The
dry run (`plan_batch`) decides; this applies it: stale samples are dropped
(and recorded with `flowmap.drop(..., reason="stale")`), and the watermark
learns from the two ways assembly can go wrong — samples went stale (lower it)
or there was no batch to give (raise it, once per wait).
"""

from __future__ import annotations

from collections.abc import Callable

import flowmap
from flowmap.trainer.batcher import BatchPlan, plan_batch
from flowmap.trainer.dispatch import Watermark
from flowmap.trainer.ready_buffer import ReadyBuffer
from flowmap.trainer.tree import LeafTrajectory


class Assembler:
    def __init__(
        self, buffer: ReadyBuffer, watermark: Watermark, max_staleness: int, groups_per_batch: int,
        on_dropped: Callable[[list[LeafTrajectory], str], None] | None = None,
        leaf_dims: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.buffer = buffer
        self.leaf_dims = leaf_dims  # dimension names of the leaves' replay arrays, if they ride
        # Told about every dropped leaf, e.g. to free its replay-store entry.
        self.on_dropped = on_dropped
        self.watermark = watermark
        self.max_staleness = max_staleness
        self.groups_per_batch = groups_per_batch
        self.starving = False  # the trainer is waiting and the watermark was already raised
        self.num_dropped = 0

    def try_assemble(self, batch_id: int) -> tuple[list[LeafTrajectory], BatchPlan] | None:
        """The samples of batch `batch_id`, oldest groups first; None when there are not enough."""
        plan = plan_batch(
            list(self.buffer.groups.values()), batch_id, self.max_staleness, self.groups_per_batch
        )
        if plan.drop:
            with flowmap.owner("ready_buffer"):
                removed = self.buffer.remove(set(plan.drop))
                flowmap.drop(plan.drop, reason="stale")
            if self.on_dropped is not None:
                self.on_dropped(removed, "stale")
            self.num_dropped += len(plan.drop)
            with flowmap.owner("driver"):
                self.watermark.on_stale()
        if not plan.ready:
            if not self.starving:
                self.starving = True
                with flowmap.owner("driver"):
                    self.watermark.on_starved()
            return None
        self.starving = False
        with flowmap.owner("ready_buffer"):
            leaves = self.buffer.take_groups(plan.take)
            flowmap.hop("ready_buffer", "batcher", leaves, name="samples",
                        items=[x.leaf_id for x in leaves], step=batch_id, dims=self.leaf_dims)
        return leaves, plan
