"""The ready buffer's side of batch assembly: apply the dry run, and steer the watermark.

Each time the trainer can take a batch, the driver asks `try_assemble`. The
dry run (`plan_batch`) decides; this applies it: groups too old to train whole
are dropped whole (recorded with `flowmap.drop(..., reason="stale")`, their
trajectories still in rollout refused when they come back), and the watermark
learns from the two ways assembly can go wrong — work went or is about to go
stale (lower it) or there was no batch to give (raise it, once per wait).

With `rollout.filter_zero_variance`, complete groups whose leaves all scored
the same are dropped first (`reason="zero_variance"`, verl/DAPO's dynamic
sampling): every advantage of such a group is 0, it would only dilute the
batch. Each dropped group frees its place in the staleness budget, so the
dispatcher starts another one and the batch still fills.
"""

from __future__ import annotations

from collections.abc import Callable

import flowmap
from flowmap.trainer.batcher import BatchPlan, plan_batch
from flowmap.trainer.dispatch import StalenessBudget, Watermark
from flowmap.trainer.ready_buffer import GroupEntry, ReadyBuffer
from flowmap.trainer.tree import LeafTrajectory


class Assembler:
    def __init__(
        self, buffer: ReadyBuffer, watermark: Watermark, max_staleness: int, groups_per_batch: int,
        on_dropped: Callable[[list[LeafTrajectory], str], None] | None = None,
        leaf_dims: dict[str, tuple[str, ...]] | None = None,
        budget: StalenessBudget | None = None,
        score: Callable[[LeafTrajectory], float] | None = None,
    ) -> None:
        self.buffer = buffer
        self.leaf_dims = leaf_dims  # dimension names of the leaves' replay arrays, if they ride
        # Told about every dropped leaf, e.g. to free its replay-store entry.
        self.on_dropped = on_dropped
        self.watermark = watermark
        self.max_staleness = max_staleness
        self.groups_per_batch = groups_per_batch
        self.budget = budget if budget is not None else StalenessBudget(groups_per_batch,
                                                                        max_staleness)
        self.score = score  # set: filter zero-variance groups with this verifier
        self.starving = False  # the trainer is waiting and the watermark was already raised
        self.num_dropped = 0  # leaf trajectories dropped as stale (waiting or on arrival)
        self.num_groups_stale = 0
        self.num_groups_filtered = 0
        self._checked: set[str] = set()  # complete groups the filter has already kept
        self._lowered_for = -1  # the batch id the watermark was last lowered for

    def start(self) -> None:
        """The waste counters at 0, so every trace carries them even when nothing is wasted."""
        with flowmap.owner("ready_buffer"):
            flowmap.counter("stale_dropped", 0)
            flowmap.counter("groups_dropped_stale", 0)
        with flowmap.owner("batcher"):
            flowmap.counter("groups_filtered", 0)

    def register(self, leaves: list[LeafTrajectory], version: int) -> None:
        """Into the buffer; a trajectory of a group already dropped is dropped on arrival."""
        with flowmap.owner("ready_buffer"):
            refused = self.buffer.register(leaves, version)
            if refused:
                self._drop_leaves(refused, "stale")

    def try_assemble(self, batch_id: int) -> tuple[list[LeafTrajectory], BatchPlan] | None:
        """The samples of batch `batch_id`, oldest groups first; None when there are not enough."""
        if self.score is not None:
            self._filter_zero_variance()
        plan = plan_batch(
            list(self.buffer.groups.values()), batch_id, self.max_staleness, self.groups_per_batch
        )
        if plan.drop_groups:
            with flowmap.owner("ready_buffer"):
                self._drop_leaves(self.buffer.drop_groups(plan.drop_groups), "stale")
                self.num_groups_stale += len(plan.drop_groups)
                flowmap.counter("groups_dropped_stale", self.num_groups_stale)
            self.budget.retired(len(plan.drop_groups))
            self._checked -= set(plan.drop_groups)
        if (plan.drop_groups or plan.at_risk) and self._lowered_for != batch_id:
            self._lowered_for = batch_id  # once per batch: the trainer asks again every turn
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
        self.budget.retired(len(plan.take))
        self._checked -= set(plan.take)
        return leaves, plan

    def _drop_leaves(self, leaves: list[LeafTrajectory], reason: str) -> None:
        if not leaves:
            return
        flowmap.drop([x.leaf_id for x in leaves], reason=reason)
        if self.on_dropped is not None:
            self.on_dropped(leaves, reason)
        if reason == "stale":
            self.num_dropped += len(leaves)
            flowmap.counter("stale_dropped", self.num_dropped)

    def _filter_zero_variance(self) -> None:
        """Drop complete groups whose leaves all scored alike (a lone leaf is kept, as in verl)."""
        assert self.score is not None
        doomed: list[GroupEntry] = []
        for g in self.buffer.complete_groups():
            if g.uid in self._checked:
                continue
            scores = {self.score(x) for x in g.samples}
            if len(scores) == 1 and len(g.samples) > 1:
                doomed.append(g)
            else:
                self._checked.add(g.uid)
        if not doomed:
            return
        with flowmap.owner("batcher"):
            self._drop_leaves(self.buffer.drop_groups([g.uid for g in doomed]), "zero_variance")
            self.num_groups_filtered += len(doomed)
            flowmap.counter("groups_filtered", self.num_groups_filtered)
        self.budget.retired(len(doomed))
