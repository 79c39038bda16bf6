"""The driver: the whole loop, one process, with the trainer ranks beside it.

    dataset -> dispatch -> rollout -> ready buffer -> batch assembly -> reward
            -> advantage -> training (DP ranks) -> weight sync -> dispatch

One event loop, no threads: each turn of it tops up the in-flight
trajectories to the watermark (new env groups only within the staleness
budget, `dispatch.py`), steps every busy engine once, registers the
trajectories that finished, applies any finished training step (weight sync),
and, when the ranks can take one, assembles and submits the next batch.
Submitting does not wait, so rollout goes on while the ranks train: that is
the asynchrony, and the version gap is its price.

Every hand-over is recorded with `flowmap.hop` under the owner that holds the
data (see docs/trainer.md for the list of seams).

The hops of real stacks are off by default and each adds its seam when on:
a reference policy (`train.kl_coef`, owner `ref`), the actor's old-log-prob
recompute (`train.ppo_epochs` / `train.mini_batches`, on the ranks),
zero-variance filtering (`rollout.filter_zero_variance`, in batch assembly)
and truncation masking (`rollout.mask_truncated`, at the reward).

With MoE or DSA on, rollout records the selections training replays, and
`rollout.transport` decides how they travel (`replay_transport.py`): with the
trajectory (payload) or through a shared-memory store, by handle.
"""

from __future__ import annotations

import time

import torch

import flowmap
from flowmap.trainer.advantage import AdvantageOutput, grpo_advantages
from flowmap.trainer.assembly import Assembler
from flowmap.trainer.batcher import BATCH_REPLAY_DIMS, BatchPlan, collate
from flowmap.trainer.config import Config
from flowmap.trainer.device import engine_device, resolve_device
from flowmap.trainer.dispatch import StalenessBudget, TrajectorySource, Watermark
from flowmap.trainer.engine.config import EngineConfig
from flowmap.trainer.engine.llm_engine import LLMEngine
from flowmap.trainer.engine.sampling import SamplingParams
from flowmap.trainer.env import CountingEnv
from flowmap.trainer.model import ModelConfig, build_model
from flowmap.trainer.progress import ProgressDisplay, StepFigures
from flowmap.trainer.ready_buffer import ReadyBuffer
from flowmap.trainer.ref import RefPolicy
from flowmap.trainer.replay import Replay
from flowmap.trainer.replay_transport import Dense, make_transport
from flowmap.trainer.reward import compute_rewards, leaf_score, mask_truncated
from flowmap.trainer.rollout import Finished, RolloutManager
from flowmap.trainer.summary import RunSummary
from flowmap.trainer.task import CountingTask, Dataset, make_tokenizer
from flowmap.trainer.train.group import StepResult, TrainerGroup
from flowmap.trainer.train.split import split_batch
from flowmap.trainer.tree import LeafTrajectory
from flowmap.trainer.warmup import warm_up
from flowmap.trainer.weight_sync import sync_weights


def engine_config(cfg: Config) -> EngineConfig:
    r = cfg.rollout
    return EngineConfig(
        num_kv_blocks=r.num_kv_blocks, block_size=r.block_size, max_num_seqs=r.max_num_seqs,
        max_num_batched_tokens=max(256, r.max_num_seqs * 8),
        return_replay=cfg.model.has_replay,  # MoE/DSA: hand back the selections to replay
    )


def model_config(cfg: Config, vocab_size: int) -> ModelConfig:
    """The model's sizes and options; the ranks rebuild the same from it (TrainerGroup)."""
    m = cfg.model
    return ModelConfig(vocab_size=vocab_size, max_seq_len=m.max_seq_len, d_model=m.d_model,
                       n_layers=m.n_layers, n_heads=m.n_heads, d_ff=m.d_ff,
                       moe_experts=m.moe_experts, moe_top_k=m.moe_top_k,
                       dsa_index_topk=m.dsa_index_topk, dsa_index_dim=m.dsa_index_dim,
                       dsa_index_heads=m.dsa_index_heads, router_noise=m.router_noise)


def watermark_for(cfg: Config) -> Watermark:
    d, n = cfg.dispatch, cfg.rollout.n
    capacity = cfg.rollout.engines * cfg.rollout.max_num_seqs
    minimum = d.min_watermark or n
    maximum = max(d.max_watermark or capacity, minimum)
    initial = d.initial_watermark or cfg.train.groups_per_batch * n
    return Watermark(initial, minimum, maximum, d.raise_step or n)


def run(cfg: Config) -> RunSummary:
    """Warm up, start the ranks and engines, run `cfg.train.steps` GRPO steps."""
    t_start = time.monotonic()
    torch.set_num_threads(1)  # 2 cores, 3 processes: one thread each
    tokenizer = make_tokenizer()
    task = CountingTask(tokenizer)
    mcfg = model_config(cfg, tokenizer.vocab_size)
    model = build_model(mcfg, cfg.seed)
    device = resolve_device(cfg.device)  # "cpu" or "cuda"; parse_args already refused a missing GPU
    display = ProgressDisplay(cfg.train.steps, cfg.progress)
    with TrainerGroup(cfg, model, device) as trainer:  # ranks start while we warm up
        with flowmap.owner("driver"):
            flowmap.mark("warmup.begin")
            losses = warm_up(model, task, cfg.task, cfg.warmup, cfg.seed)
            flowmap.mark("warmup.end")
        if losses:
            display.message(f"warm-up: {len(losses)} supervised steps, loss {losses[-1]:.3f}")
        trainer.load_initial_weights(model)
        on = engine_device(device)  # engines and reference model beside rank 0 (GPU 0 on cuda)
        engines = [LLMEngine(model, engine_config(cfg), instance=i, device=on)
                   for i in range(cfg.rollout.engines)]
        ref = RefPolicy(model, cfg.rollout.temperature, on) if cfg.train.kl_coef > 0 else None
        loop = Loop(cfg, task, engines, trainer, display, ref)
        try:
            summary = loop.run()
        finally:
            display.close()
    summary.wall_s = time.monotonic() - t_start
    return summary


class Loop:
    """The driver's event loop (state that lives for one run)."""

    def __init__(self, cfg: Config, task: CountingTask, engines: list[LLMEngine],
                 trainer: TrainerGroup, display: ProgressDisplay,
                 ref: RefPolicy | None = None) -> None:
        self.cfg = cfg
        self.ref = ref  # the reference policy (train.kl_coef > 0)
        self.task = task
        self.engines = engines
        self.trainer = trainer
        self.display = display
        params = SamplingParams(
            temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
            max_tokens=cfg.task.max_tokens_per_turn, stop_token_ids=(task.tokenizer.eos_id,),
        )
        self.transport: Dense = make_transport(cfg.rollout.transport, cfg.model.has_replay)
        self.rollout = RolloutManager(engines, CountingEnv(task, cfg.task), params,
                                      turn_replay=self.transport.kind == "payload")
        self.source = TrajectorySource(Dataset(cfg.seed), cfg.rollout.n)
        self.buffer = ReadyBuffer(cfg.rollout.n)
        self.watermark = watermark_for(cfg)
        t = cfg.train
        # Synchronous: one batch of groups per version, all of it under that version's weights.
        self.budget = StalenessBudget(t.groups_per_batch, 0 if t.synchronous else t.max_staleness)
        self.assembler = Assembler(self.buffer, self.watermark, t.max_staleness,
                                   t.groups_per_batch, self.transport.dropped,
                                   self.transport.trajectory_dims, self.budget,
                                   score=self._leaf_score if cfg.rollout.filter_zero_variance
                                   else None)
        self.version = 0
        self.next_batch = 0
        self.rewards: dict[int, float] = {}
        self.staleness: dict[int, int] = {}
        self.summary = RunSummary(cfg.train.steps, 0.0, 0.0, [], [], [], 0, 0, 0)
        self._last_in_flight = -1

    def run(self) -> RunSummary:
        """Run the loop to `train.steps`; the replay transport gives back what it holds at the end."""
        try:
            return self._run()
        finally:
            self.transport.close()

    def _run(self) -> RunSummary:
        t0 = time.monotonic()
        steps = self.cfg.train.steps
        with flowmap.owner("driver"):
            flowmap.step(0)
            flowmap.counter("target_watermark", self.watermark.target)
            self.assembler.start()
            while self.version < steps:
                self._refill()
                for finished in self.rollout.step():
                    self._register(finished)
                self._refill()
                idle = not self.rollout.has_work()
                for result in self.trainer.poll(timeout=0.02 if idle else 0.0):
                    self._on_step_done(result, t0)
                while self.trainer.num_outstanding < self.cfg.train.queue_depth and \
                        self.next_batch < steps:
                    assembled = self.assembler.try_assemble(self.next_batch)
                    if assembled is None:
                        break
                    self._train_on(self.next_batch, *assembled)
                    self.next_batch += 1
                    if self.cfg.train.synchronous:
                        self._wait_for_steps(t0)
        s = self.summary
        s.rl_wall_s = time.monotonic() - t0
        s.generated_tokens = self.rollout.num_generated_tokens
        a = self.assembler
        s.dropped_stale = a.num_dropped
        s.groups_dropped_stale, s.groups_filtered = a.num_groups_stale, a.num_groups_filtered
        return s

    # -- dispatch and collection -----------------------------------------------------

    def _refill(self) -> None:
        """Drip trajectories into the engines until the in-flight count meets the watermark."""
        while self.rollout.num_in_flight < self.watermark.target and self.rollout.free_capacity():
            if self.source.starts_group:
                if self.budget.room(self.version, self.next_batch) <= 0:
                    break  # anything started now could only go stale
                self.budget.started()
            group, sample_index = self.source.next()
            if self.buffer.expect(group.uid):  # not for a group already dropped whole
                self.rollout.dispatch(group, sample_index)
        self._count_in_flight()

    def _count_in_flight(self) -> None:
        if self.rollout.num_in_flight != self._last_in_flight:
            self._last_in_flight = self.rollout.num_in_flight
            flowmap.counter("in_flight", self._last_in_flight)

    def _register(self, f: Finished) -> None:
        leaves = self.transport.attach(f.engine, f.leaves, f.replays)
        flowmap.hop(f"rollout/{f.engine}", "ready_buffer", leaves, name="trajectory",
                    items=[x.leaf_id for x in leaves], version=self.version,
                    dims=self.transport.trajectory_dims)
        self.summary.leaves_registered += len(leaves)
        self.assembler.register(leaves, self.version)
        self._count_in_flight()

    # -- batch -> reward -> advantage -> ranks ------------------------------------------

    def _leaf_score(self, leaf: LeafTrajectory) -> float:
        return leaf_score(leaf, self.task)

    def _train_on(self, batch_id: int, leaves: list[LeafTrajectory], plan: BatchPlan) -> None:
        flowmap.step(batch_id)
        self.summary.groups_trained += len(plan.take)
        items = [x.leaf_id for x in leaves]
        with flowmap.owner("batcher"):
            batch = collate(leaves, self.task.tokenizer.pad_id)
            flowmap.counter("staleness_max", plan.max_gap)
            dims = BATCH_REPLAY_DIMS if isinstance(batch.replay, Replay) else None
            flowmap.hop("batcher", "reward", batch, name="rollout_batch", items=items,
                        step=batch_id, dims=dims)
        with flowmap.owner("reward"):
            rewards = compute_rewards(batch, self.task)
            reward_mean = float(rewards.scores.mean())
            flowmap.counter("reward_mean", reward_mean)
            flowmap.hop("reward", "advantage", rewards, name="token_level_rewards", items=items,
                        step=batch_id)
            if self.cfg.rollout.mask_truncated:
                masked = mask_truncated(batch, self.task.tokenizer.eos_id)
                batch.response_mask = masked.response_mask  # training masks them too
                self.summary.leaves_truncated += int(masked.truncated.sum())
                flowmap.counter("truncated", self.summary.leaves_truncated)
                flowmap.hop("reward", "advantage", masked, name="truncation_mask", items=items,
                            step=batch_id)
        with flowmap.owner("advantage"):
            advantages = grpo_advantages(rewards.token_level_rewards, batch.response_mask,
                                         batch.uid)
            flowmap.hop("advantage", "batcher", AdvantageOutput(advantages), name="advantages",
                        items=items, step=batch_id)
        per_row = None
        if self.ref is not None:
            with flowmap.owner("ref"):
                per_row = {"ref_log_probs": self.ref.log_probs(batch, items, batch_id)}
        with flowmap.owner("batcher"):
            t = self.cfg.train
            shards = split_batch(batch, advantages, t.dp, t.micro_batches, t.mini_batches,
                                 per_row)
            self.transport.submitted(batch_id, leaves)
            self.trainer.submit(batch_id, shards)
        self.rewards[batch_id] = reward_mean
        self.staleness[batch_id] = plan.max_gap

    # -- a finished training step --------------------------------------------------------

    def _wait_for_steps(self, t0: float) -> None:
        """Synchronous mode: nothing else happens until every submitted step has reported."""
        while self.trainer.num_outstanding:
            for result in self.trainer.poll(timeout=0.5):
                self._on_step_done(result, t0)

    def _on_step_done(self, result: StepResult, t0: float) -> None:
        self.transport.step_done(result.batch_id)  # every rank has read its rows: free them
        self.version = result.version
        resubmitted = sync_weights(self.engines, self.rollout, self.trainer.weights(result),
                                   result.version, attempts=self.cfg.train.sync_attempts)
        if result.ipc_handles is not None:
            # The engines' copies out of rank 0's snapshot must be done before rank 0 may write
            # version + 2 into it: another process does not wait for this one's stream.
            torch.cuda.synchronize()
        s = self.summary
        s.resubmitted += resubmitted
        s.reward_per_step.append(self.rewards[result.batch_id])
        s.staleness_per_step.append(self.staleness[result.batch_id])
        s.loss_per_step.append(result.metrics["loss"])
        s.watermark.append(self.watermark.target)
        elapsed = time.monotonic() - t0
        self.display.update(StepFigures(
            step=result.batch_id, reward_mean=self.rewards[result.batch_id],
            staleness_max=self.staleness[result.batch_id],
            tokens_per_s=self.rollout.num_generated_tokens / max(elapsed, 1e-9),
            loss=result.metrics["loss"], in_flight=self.rollout.num_in_flight,
            watermark=self.watermark.target, ready_depth=self.buffer.depth,
        ))
