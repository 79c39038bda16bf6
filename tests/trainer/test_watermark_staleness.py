"""The adaptive watermark and the version gap.

Unit level: the dry run and the assembler on hand-registered samples.
Driver level: the real event loop with real engines and a stand-in trainer,
once with a slow producer (the watermark must rise) and once with a slow
trainer and an eager producer (samples go stale: the watermark must fall),
and in both no batch carries a sample beyond `max_staleness`.
"""

from __future__ import annotations

import time

import hypothesis.strategies as st
import torch
from hypothesis import given, settings

from flowmap.trainer.assembly import Assembler
from flowmap.trainer.batcher import plan_batch
from flowmap.trainer.config import build
from flowmap.trainer.dispatch import StalenessBudget, Watermark
from flowmap.trainer.driver import Loop, engine_config, model_config
from flowmap.trainer.engine.llm_engine import LLMEngine
from flowmap.trainer.model import build_model
from flowmap.trainer.progress import ProgressDisplay
from flowmap.trainer.ready_buffer import ReadyBuffer
from flowmap.trainer.task import CountingTask, make_tokenizer
from flowmap.trainer.train.group import StepResult
from flowmap.trainer.tree import LeafTrajectory


def _leaf(uid: str, traj: str) -> LeafTrajectory:
    return LeafTrajectory(traj, traj, uid, [1], [3, 2], [1, 1], [-1.0, -1.0], [[3, 2]], ["1"], [0])


def _register_group(buffer: ReadyBuffer, uid: str, version: int, n: int = 2) -> None:
    for i in range(n):
        buffer.register([_leaf(uid, f"{uid}-t{i}")], version)


# -- unit level -------------------------------------------------------------------------


def test_watermark_is_clamped_both_ways() -> None:
    w = Watermark(target=8, minimum=4, maximum=12, step=4)
    w.on_starved()
    w.on_starved()
    assert w.target == 12
    for _ in range(5):
        w.on_stale()
    assert w.target == 4


def test_waiting_trainer_raises_the_watermark_once_per_wait() -> None:
    buffer = ReadyBuffer(group_size=2)
    w = Watermark(target=4, minimum=2, maximum=64, step=2)
    assembler = Assembler(buffer, w, max_staleness=1, groups_per_batch=1)
    assert assembler.try_assemble(0) is None
    assert assembler.try_assemble(0) is None  # same wait: no second raise
    assert w.target == 6
    _register_group(buffer, "a", version=0)
    assert assembler.try_assemble(0) is not None
    assert assembler.try_assemble(1) is None  # a new wait
    assert w.target == 8


def test_stale_groups_are_dropped_whole_and_lower_the_watermark() -> None:
    buffer = ReadyBuffer(group_size=2)
    w = Watermark(target=10, minimum=2, maximum=64, step=2)
    assembler = Assembler(buffer, w, max_staleness=1, groups_per_batch=1)
    _register_group(buffer, "old", version=0)
    _register_group(buffer, "new", version=2)
    leaves, plan = assembler.try_assemble(3)
    assert {x.uid for x in leaves} == {"new"}
    assert plan.drop_groups == ["old"] and sorted(plan.drop) == ["old-t0", "old-t1"]
    assert plan.max_gap == 1
    assert w.target == 8 and assembler.num_dropped == 2 and assembler.num_groups_stale == 1
    assert buffer.depth == 0


def test_a_group_with_one_stale_sample_goes_whole_and_its_stragglers_are_refused() -> None:
    buffer = ReadyBuffer(group_size=3)
    w = Watermark(target=10, minimum=2, maximum=64, step=2)
    assembler = Assembler(buffer, w, max_staleness=1, groups_per_batch=1)
    for _ in range(3):
        buffer.expect("g")
    assembler.register([_leaf("g", "g-t0")], 0)  # gap 2 at batch 2: too old
    assembler.register([_leaf("g", "g-t1")], 2)  # fresh, but its group cannot train whole
    assert assembler.try_assemble(2) is None
    assert assembler.num_dropped == 2 and assembler.num_groups_stale == 1
    assert "g" not in buffer.groups
    assembler.register([_leaf("g", "g-t2")], 2)  # the straggler comes back: refused
    assert assembler.num_dropped == 3 and buffer.depth == 0 and "g" not in buffer.groups


def test_oldest_complete_groups_go_first() -> None:
    buffer = ReadyBuffer(group_size=2)
    _register_group(buffer, "b", version=2)
    _register_group(buffer, "a", version=1)
    buffer.expect("incomplete")
    buffer.expect("incomplete")
    buffer.register([_leaf("incomplete", "i-t0")], 0)  # 1 of 2 back: never taken
    plan = plan_batch(list(buffer.groups.values()), batch_id=2, max_staleness=2,
                      groups_per_batch=1)
    assert plan.take == ["a"] and plan.drop == [] and plan.drop_groups == []
    # the incomplete group (tag 0) would be gap 3 > 2 at batch 3: its waiting sample and
    # its trajectory still in rollout are at risk
    assert plan.at_risk == 2


def test_the_staleness_budget_counts_batches_still_usable() -> None:
    b = StalenessBudget(groups_per_batch=4, max_staleness=1)
    assert b.room(version=0, next_batch=0) == 8  # batches 0 and 1 can use new groups
    for _ in range(8):
        b.started()
    assert b.room(version=0, next_batch=0) == 0
    b.retired(4)  # batch 0 taken: next_batch 1, step 0 trains at version 0
    assert b.room(version=0, next_batch=1) == 0  # batch 1's groups are already live
    assert b.room(version=1, next_batch=1) == 4  # step 0 done: batch 2 may start
    sync = StalenessBudget(groups_per_batch=4, max_staleness=0)
    assert sync.room(version=0, next_batch=0) == 4 and sync.room(version=0, next_batch=1) == 0


@settings(max_examples=200, deadline=None)
@given(
    tags=st.lists(st.tuples(st.integers(0, 6), st.integers(1, 3)), min_size=1, max_size=12),
    batch_id=st.integers(0, 8),
    max_staleness=st.integers(0, 3),
    groups_per_batch=st.integers(1, 4),
)
def test_no_taken_sample_is_beyond_max_staleness(
    tags: list[tuple[int, int]], batch_id: int, max_staleness: int, groups_per_batch: int
) -> None:
    buffer = ReadyBuffer(group_size=2)
    registered: dict[str, int] = {}
    for g, (version, returned) in enumerate(tags):
        for _ in range(2):
            buffer.expect(f"u{g}")
        for i in range(min(returned, 2)):  # 1 of 2 trajectories: incomplete group
            buffer.register([_leaf(f"u{g}", f"u{g}-t{i}")], version + i % 2)
            registered[f"u{g}"] = registered.get(f"u{g}", 0) + 1
    w = Watermark(target=8, minimum=2, maximum=64, step=2)
    assembler = Assembler(buffer, w, max_staleness, groups_per_batch)
    got = assembler.try_assemble(batch_id)
    left = [s for g in buffer.groups.values() for s in g.samples]
    # nothing left waiting is already too old, and nothing was dropped from a group kept
    assert all(batch_id - s.version_tag <= max_staleness for s in left)
    assert all(registered[g.uid] == len(g.samples) for g in buffer.groups.values())
    if got is None:
        return
    leaves, plan = got
    assert all(batch_id - x.version_tag <= max_staleness for x in leaves)
    assert len({x.uid for x in leaves}) == groups_per_batch
    # only whole groups train: every trajectory of every taken group is in the batch
    taken: dict[str, int] = {}
    for x in leaves:
        taken[x.uid] = taken.get(x.uid, 0) + 1
    assert all(k == 2 and registered[uid] == 2 for uid, k in taken.items())


# -- driver level -----------------------------------------------------------------------


class _StandInTrainer:
    """Finishes each submitted step `step_s` seconds later; weights are the driver's model."""

    def __init__(self, model: torch.nn.Module, step_s: float) -> None:
        self.model = model
        self.step_s = step_s
        self.due: dict[int, float] = {}
        self.trained: list[tuple[int, list[str]]] = []

    @property
    def num_outstanding(self) -> int:
        return len(self.due)

    def submit(self, batch_id: int, shards) -> None:  # noqa: ANN001
        ids = [i for rank in shards.leaf_ids for mb in rank for i in mb]
        self.trained.append((batch_id, ids))
        self.due[batch_id] = time.monotonic() + self.step_s

    def poll(self, timeout: float = 0.0) -> list[StepResult]:
        if timeout:
            time.sleep(min(timeout, 0.005))
        now = time.monotonic()
        done = sorted(b for b, t in self.due.items() if t <= now)
        for b in done:
            del self.due[b]
        return [StepResult(b, b + 1, {"loss": 0.0}, 0, []) for b in done]

    def weights(self, result: StepResult) -> dict[str, torch.Tensor]:
        return {k: v.detach() for k, v in self.model.named_parameters()}


def _loop(step_s: float, engine_delay_s: float, **overrides) -> tuple[Loop, _StandInTrainer]:
    cfg = build({"train.steps": 6, "train.groups_per_batch": 2, "rollout.n": 4,
                 "rollout.engines": 1, "train.dp": 1, "progress": False, **overrides})
    task = CountingTask(make_tokenizer())
    model = build_model(model_config(cfg, task.tokenizer.vocab_size), 0)
    engine = LLMEngine(model, engine_config(cfg))
    if engine_delay_s:
        step = engine.step

        def slow_step():  # noqa: ANN202
            time.sleep(engine_delay_s)
            return step()

        engine.step = slow_step  # type: ignore[method-assign]
    trainer = _StandInTrainer(model, step_s)
    loop = Loop(cfg, task, [engine], trainer, ProgressDisplay(6, live=False))  # type: ignore[arg-type]
    return loop, trainer


def _versions_ok(loop: Loop, trainer: _StandInTrainer) -> None:
    assert all(gap <= loop.cfg.train.max_staleness for gap in loop.staleness.values())
    assert len(trainer.trained) == loop.cfg.train.steps


def test_slow_producer_raises_the_watermark() -> None:
    loop, trainer = _loop(step_s=0.0, engine_delay_s=0.01)
    start = loop.watermark.target
    loop.run()
    assert loop.watermark.num_raises >= 3
    assert loop.watermark.num_raises > loop.watermark.num_lowers
    assert max(loop.summary.watermark) > start
    # docs/trainer.md: it climbs while the trainer starves, then holds (no oscillation)
    assert loop.summary.watermark == sorted(loop.summary.watermark)
    _versions_ok(loop, trainer)


def test_an_eager_producer_wastes_nothing() -> None:
    """A slow trainer and a fast, wide rollout: the budget holds rollout back, nothing goes stale."""
    loop, trainer = _loop(step_s=0.15, engine_delay_s=0.0, **{"dispatch.initial_watermark": 32})
    loop.run()
    assert loop.assembler.num_dropped == 0 and loop.watermark.num_lowers == 0
    cfg = loop.cfg.train
    # groups ever started: the steps' batches plus at most max_staleness batches ahead
    assert loop.source.num_dispatched <= (cfg.steps + cfg.max_staleness) * cfg.groups_per_batch * 4
    _versions_ok(loop, trainer)


def test_synchronous_mode_waits_staleness_zero_and_no_drops() -> None:
    loop, trainer = _loop(step_s=0.02, engine_delay_s=0.0, **{"train.synchronous": True})
    summary = loop.run()
    assert set(loop.staleness.values()) == {0}  # every batch all from the current version
    assert loop.assembler.num_dropped == 0
    assert summary.resubmitted == 0  # nothing was in flight at any weight sync
    g = loop.cfg.train.groups_per_batch
    assert loop.source.num_dispatched == loop.cfg.train.steps * g * loop.cfg.rollout.n
    _versions_ok(loop, trainer)


def test_asynchronous_mode_overlaps_rollout_with_training() -> None:
    loop, trainer = _loop(step_s=0.05, engine_delay_s=0.0)
    loop.run()
    assert max(loop.staleness.values()) == 1  # batches built while the previous step trained
    assert loop.assembler.num_dropped == 0
    _versions_ok(loop, trainer)


def test_a_group_dropped_while_still_being_dispatched_starts_no_more_trajectories() -> None:
    buffer = ReadyBuffer(group_size=3)
    assert buffer.expect("g")
    buffer.register([_leaf("g", "g-t0")], 0)
    buffer.drop_groups(["g"])
    assert not buffer.expect("g") and "g" not in buffer.groups
