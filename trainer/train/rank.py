"""One data-parallel rank: a real process with its own model replica and optimiser.

Ranks are spawned once (torch.multiprocessing, `spawn`) and joined into a gloo
process group. Each training step a rank receives only a small job message:
its micro-batches are already in a shared-memory slot, the job says where.
With MoE/DSA it replays rollout's selections: they came in the slot with the
micro-batch (payload transport), or the job names their replay-store entries
and the rank reads the rows of its own micro-batches from the store (handle
transport, hop `replay_store -> trainer/rank<k> : replay`).
It runs forward/backward per micro-batch with the global-token-mean loss,
all-reduces the gradients as sums (so every replica holds the gradient of the
whole batch), steps its optimiser and says it is done. Rank 0 also writes the
new weights into a shared-memory weight slot for the driver's weight sync.
"""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

import flowmap
from flowmap.trainer.batcher import BATCH_REPLAY_DIMS
from flowmap.trainer.config import Config, build
from flowmap.trainer.device import backend_for, moved, rank_device
from flowmap.trainer.ipc_weights import Handles, IpcPublisher
from flowmap.trainer.model import ModelConfig, TinyLM, build_model
from flowmap.trainer.replay import Replay, ReplayHandle, fetch_batch
from flowmap.trainer.train import shm_pool
from flowmap.trainer.train.loss import LossSettings
from flowmap.trainer.train.optim import AdamW
from flowmap.trainer.train.shm_pool import TensorSpec
from flowmap.trainer.train.split import MicroBatch, micro_batch_from
from flowmap.trainer.train.updates import (
    MicroLosses,
    earlier_update,
    old_log_probs,
    sum_over_ranks,
    update_plan,
)


@dataclass
class Job:
    """driver -> rank control message (the data itself is in shared memory)."""

    kind: str  # "init" (load weights) | "train" | "probe" (loss and grads, no step) | "stop"
    batch_id: int = -1
    slot: int = -1
    specs: list[TensorSpec] = field(default_factory=list)
    leaf_ids: list[list[str]] = field(default_factory=list)  # per micro-batch
    global_response_tokens: int = 0
    weight_slot: int = 0
    weight_specs: list[TensorSpec] = field(default_factory=list)
    # Handle transport: per micro-batch, per row, the replay-store entry (~160 B pickled).
    replay_handles: list[list[ReplayHandle | None]] | None = None
    mini_batch_tokens: list[int] = field(default_factory=list)  # loss denominator per mini-batch


@dataclass
class RankResult:
    """rank -> driver: done with a job; rank 0 adds metrics and where the new weights are."""

    rank: int
    kind: str
    batch_id: int
    slot: int
    metrics: dict[str, float] = field(default_factory=dict)
    version: int = -1
    weight_slot: int = -1
    weight_specs: list[TensorSpec] = field(default_factory=list)
    ipc_handles: Handles | None = None  # on CUDA: the new weights' IPC handles, not a slot


@dataclass
class RankSpec:
    """Everything a rank needs, handed over once at spawn (shared tensors and queues included)."""

    config: dict[str, Any]
    model_config: dict[str, Any]
    init_method: str
    jobs: list[Any]  # one queue per rank
    results: Any
    slots: list[list[torch.Tensor]]  # [rank][slot] shared byte buffers
    weight_slots: list[torch.Tensor]
    device: str = "cpu"  # resolved: "cpu" or "cuda" (trainer/device.py places each rank)


def rank_main(rank: int, spec: RankSpec) -> None:
    """Entry point of a rank process (torch.multiprocessing.spawn passes the rank)."""
    torch.set_num_threads(1)
    cfg = build(spec.config)
    dp = cfg.train.dp
    me = f"trainer/rank{rank}"
    flowmap.set_owner(me)
    device = rank_device(spec.device, rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # before the group: NCCL binds each rank to its GPU
    dist.init_process_group(backend_for(spec.device, dp), init_method=spec.init_method,
                            rank=rank, world_size=dp)
    dtype = getattr(torch, cfg.train.dtype)
    model = build_model(ModelConfig(**spec.model_config), cfg.seed).to(device=device, dtype=dtype)
    optimizer = AdamW(model.parameters(), lr=cfg.train.lr)
    # On CUDA rank 0 publishes its weights by IPC handle (trainer/ipc_weights.py), not by slot.
    publisher = IpcPublisher(model) if rank == 0 and device.type == "cuda" else None
    try:
        while (job := _next_job(spec.jobs[rank])) is not None:
            if job.kind == "init":
                _load_initial(model, spec.weight_slots[job.weight_slot], job.weight_specs, me)
                continue
            spec.results.put(_train(rank, me, job, model, optimizer, cfg, spec, publisher))
    except KeyboardInterrupt:  # Ctrl-C reaches every process of the group; the driver reports it
        pass
    finally:
        dist.destroy_process_group()


def _next_job(jobs: Any) -> Job | None:
    """The next job; None on "stop" or when the driver is gone (no rank outlives its driver)."""
    parent = multiprocessing.parent_process()
    while True:
        try:
            job: Job = jobs.get(timeout=1.0)
        except queue.Empty:
            if parent is not None and not parent.is_alive():
                return None
            continue
        return None if job.kind == "stop" else job


def _load_initial(model: TinyLM, slot: torch.Tensor, specs: list[TensorSpec], me: str) -> None:
    weights = shm_pool.read(slot, specs)
    flowmap.hop("driver", me, weights, name="initial_weights", transport="shm")
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, tensor in weights.items():
            params[name].copy_(tensor)


def _micro_batches(slot: torch.Tensor, job: Job) -> list[MicroBatch]:
    views = shm_pool.read(slot, job.specs)
    handles = job.replay_handles
    return [micro_batch_from(views, m, None if handles is None else handles[m])
            for m in range(len(job.leaf_ids))]


def _on_device(mbs: list[MicroBatch], device: torch.device) -> list[MicroBatch]:
    """The micro-batches on the rank's device (the slot is host memory); on CPU, themselves."""
    return mbs if device.type == "cpu" else [moved(mb, device) for mb in mbs]


def _replay(mb: MicroBatch, me: str, ids: list[str], batch_id: int) -> Replay | None:
    """The selections to replay: from the micro-batch, or read from the store by handle."""
    if not isinstance(mb.replay, list):
        return mb.replay
    replay = fetch_batch(mb.replay, mb.attention_mask)  # (b, T', L, k): own rows only
    flowmap.hop("replay_store", me, replay, name="replay", transport="shm", items=ids,
                step=batch_id, dims=BATCH_REPLAY_DIMS)
    return replay


def _train(
    rank: int, me: str, job: Job, model: TinyLM, optimizer: AdamW,
    cfg: Config, spec: RankSpec, publisher: IpcPublisher | None = None,
) -> RankResult:
    flowmap.step(job.batch_id)
    dp = cfg.train.dp
    device = next(model.parameters()).device
    mbs = _micro_batches(spec.slots[rank][job.slot], job)
    replays: list[Replay | None] = []
    for mb, ids in zip(mbs, job.leaf_ids, strict=True):
        dims = BATCH_REPLAY_DIMS if isinstance(mb.replay, Replay) else None
        flowmap.hop("batcher", me, mb, name="micro_batch", transport="shm", items=ids,
                    step=job.batch_id, dims=dims)
        replays.append(_replay(mb, me, ids, job.batch_id))
    mbs = _on_device(mbs, device)  # after the hops: they record what crossed, in the slot
    losses = _losses(me, job, model, mbs, replays, cfg, spec.slots[rank][job.slot])
    updates = update_plan(len(mbs), cfg.train.ppo_epochs, job.mini_batch_tokens,
                          job.global_response_tokens)
    for update in updates[:-1]:
        earlier_update(losses, update, optimizer, dp, cfg.train.grad_clip, cfg.train.grad_reduce)
    last = updates[-1]
    optimizer.zero_grad()
    params = list(model.parameters())
    sums = torch.zeros(4, dtype=torch.float64, device=device)  # loss, entropy, clipped, ratio
    for i in last.indices:
        parts = losses.of(i, last.tokens)
        parts.loss.backward()
        sums += torch.stack([parts.loss.detach(), parts.entropy_sum, parts.clipped_sum,
                             parts.ratio_sum]).double()
    grads = torch.cat([_grad(p).reshape(-1) for p in params])  # (num_params,)
    if dp > 1:  # flowmap records both as `<me> -> group[0..dp-1] : all_reduce` by itself
        grads = sum_over_ranks(grads, cfg.train.grad_reduce)
        sums = sum_over_ranks(sums, cfg.train.grad_reduce)
    _scatter(grads, params)
    n = max(last.tokens, 1)
    metrics = {"loss": float(sums[0]), "entropy": float(sums[1]) / n,
               "clip_frac": float(sums[2]) / n, "ratio_mean": float(sums[3]) / n,
               "kl": losses.kl_mean(n, dp)}
    result = RankResult(rank, job.kind, job.batch_id, job.slot)
    if job.kind == "probe":  # the exactness test reads loss and gradients, weights stay
        if rank == 0:
            result.metrics = metrics
            result.weight_specs = shm_pool.write(spec.weight_slots[0], [("grads", grads)])
            result.weight_slot = 0
        return result
    metrics["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, cfg.train.grad_clip))
    optimizer.step()
    if rank == 0:
        _publish(result, model, metrics, job, spec, publisher)
    return result


def _losses(me: str, job: Job, model: TinyLM, mbs: list[MicroBatch],
            replays: list[Replay | None], cfg: Config, slot: torch.Tensor) -> MicroLosses:
    """What each micro-batch's loss compares against: reference and (recomputed) old log-probs."""
    t = cfg.train
    settings = LossSettings(t.clip_eps, cfg.rollout.temperature, t.kl_coef)
    losses = MicroLosses(model, mbs, replays, settings)
    device = next(model.parameters()).device
    losses.kl_sum = losses.kl_sum.to(device)
    if t.kl_coef > 0:
        views = shm_pool.read(slot, job.specs)
        refs = [views[f"{m}.ref_log_probs"] for m in range(len(mbs))]
        for ref, ids in zip(refs, job.leaf_ids, strict=True):
            flowmap.hop("ref", me, ref, name="ref_log_probs", transport="shm", items=ids,
                        step=job.batch_id)
        losses.refs = [ref.to(device) for ref in refs]
    if t.recomputes_old_log_probs:
        losses.olds = old_log_probs(model, mbs, replays, settings.temperature)
        for old, ids in zip(losses.olds, job.leaf_ids, strict=True):
            flowmap.hop(me, me, old, name="old_log_probs", items=ids, step=job.batch_id)
    return losses


def _publish(result: RankResult, model: TinyLM, metrics: dict[str, float], job: Job,
             spec: RankSpec, publisher: IpcPublisher | None = None) -> None:
    """Rank 0: new weights into the weight slot of this version (on CUDA: their IPC handles,
    recorded by flowmap's cuda_ipc capture as they are made); metrics as counters."""
    version = job.batch_id + 1
    result.version, result.metrics = version, metrics
    if publisher is not None:
        result.ipc_handles = publisher.publish(model, version)
    else:
        slot_index = version % len(spec.weight_slots)  # double-buffered: driver may read v-1
        slot = spec.weight_slots[slot_index]
        result.weight_specs = shm_pool.write(slot, list(model.named_parameters()))
        result.weight_slot = slot_index
        state_dict = shm_pool.read(slot, result.weight_specs)
        flowmap.hop("trainer/rank0", "weight_sync", state_dict, name="state_dict",
                    transport="shm", step=job.batch_id, version=version)
    for name in ("loss", "entropy", "grad_norm", "clip_frac"):
        flowmap.counter(name, metrics[name])
    if spec.config["train"]["kl_coef"] > 0:
        flowmap.counter("kl", metrics["kl"])


def _grad(p: torch.Tensor) -> torch.Tensor:
    return p.grad if p.grad is not None else torch.zeros_like(p)


def _scatter(flat: torch.Tensor, params: Sequence[torch.Tensor]) -> None:
    offset = 0
    for p in params:
        n = p.numel()
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        p.grad.copy_(flat[offset : offset + n].view_as(p))
        offset += n

