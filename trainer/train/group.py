"""The driver's handle on the data-parallel ranks: spawn, submit, poll, weights, close.

`submit` returns at once: the ranks train while the driver goes on rolling
out (the asynchrony of asynchronous RL is this call not blocking). Step 4 of
the seven happens here: each rank's micro-batches are written into one of its
shared-memory slots and only their layout is queued (with the handle transport
also each row's replay-store handle, never the arrays). A step is finished when
every rank has reported; rank 0's report says where the new weights are.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import shutil
import tempfile
from dataclasses import dataclass, field

import torch
import torch.multiprocessing as mp

import flowmap
from flowmap.trainer.config import Config
from flowmap.trainer.ipc_weights import Handles, open_handles
from flowmap.trainer.model import TinyLM
from flowmap.trainer.train import shm_pool
from flowmap.trainer.train.rank import Job, RankResult, RankSpec, rank_main
from flowmap.trainer.train.shm_pool import SlotPool, TensorSpec
from flowmap.trainer.train.split import RankShards

SLOTS_PER_RANK = 2  # one being trained on, one being filled (queue_depth 2)


@dataclass(slots=True)
class StepResult:
    """A finished training step, as the driver sees it."""

    batch_id: int
    version: int  # weight version the step produced (batch_id + 1)
    metrics: dict[str, float]
    weight_slot: int
    weight_specs: list[TensorSpec]
    ipc_handles: Handles | None = None  # on CUDA the weights come by IPC handle, not by slot


@dataclass(slots=True)
class _Outstanding:
    acks: set[int] = field(default_factory=set)
    rank0: RankResult | None = None


class TrainerGroup:
    def __init__(self, cfg: Config, model: TinyLM, device: str = "cpu") -> None:
        """Spawn `cfg.train.dp` ranks replicating `model`'s architecture; returns at once.

        `device`: resolved ("cpu" or "cuda"); trainer/device.py places each rank."""
        self.cfg = cfg
        self.dp = cfg.train.dp
        itemsize = getattr(torch, cfg.train.dtype).itemsize
        self.pools = [SlotPool(SLOTS_PER_RANK, cfg.train.shm_slot_bytes) for _ in range(self.dp)]
        shapes = [tuple(p.shape) for p in model.parameters()]
        num_params = sum(p.numel() for p in model.parameters())
        # Two weight slots (double-buffered versions); a probe's flat gradient fits too.
        weight_bytes = max(shm_pool.bytes_needed(shapes, itemsize),
                           shm_pool.bytes_needed([(num_params,)], itemsize))
        self.weight_slots = [shm_pool.new_slot(weight_bytes) for _ in range(2)]
        ctx = mp.get_context("spawn")
        self.jobs = [ctx.Queue() for _ in range(self.dp)]
        self.results = ctx.Queue()
        self.store_dir = tempfile.mkdtemp(prefix="flowmap-gloo-")
        spec = RankSpec(
            config=cfg.to_dict(),
            model_config=dataclasses.asdict(model.cfg),
            init_method="file://" + os.path.join(self.store_dir, "store"),
            jobs=self.jobs,
            results=self.results,
            slots=[p.slots for p in self.pools],
            weight_slots=self.weight_slots,
            device=device,
        )
        self.context = mp.spawn(rank_main, args=(spec,), nprocs=self.dp, join=False)
        self.outstanding: dict[int, _Outstanding] = {}
        self.closed = False

    @property
    def num_outstanding(self) -> int:
        return len(self.outstanding)

    def load_initial_weights(self, model: TinyLM) -> None:
        """Every rank starts from the driver's (warmed-up) weights."""
        dtype = getattr(torch, self.cfg.train.dtype)
        named = [(n, p.detach().to(dtype)) for n, p in model.named_parameters()]
        specs = shm_pool.write(self.weight_slots[0], named)
        with flowmap.owner("driver"):  # the queue's hop is captured by flowmap itself
            for q in self.jobs:
                q.put(Job("init", weight_slot=0, weight_specs=specs))

    def submit(self, batch_id: int, shards: RankShards, *, probe: bool = False) -> None:
        """Write each rank's micro-batches into a free slot and queue the job; returns at once."""
        for rank in range(self.dp):
            slot = self.pools[rank].acquire()
            extras = shards.extras[rank] if shards.extras else [{} for _ in shards.leaf_ids[rank]]
            tensors = [
                (f"{m}.{key}", t)
                for m, mb in enumerate(shards.micro_batches[rank])
                for key, t in [*mb.tensors(), *extras[m].items()]
            ]
            specs = shm_pool.write(self.pools[rank].slots[slot], tensors)
            handles = None if shards.replay_handles is None else shards.replay_handles[rank]
            self.jobs[rank].put(
                Job("probe" if probe else "train", batch_id, slot, specs,
                    shards.leaf_ids[rank], shards.global_response_tokens,
                    replay_handles=handles, mini_batch_tokens=shards.mini_batch_tokens)
            )
        self.outstanding[batch_id] = _Outstanding()

    def poll(self, timeout: float = 0.0) -> list[StepResult]:
        """Steps all ranks have finished; waits up to `timeout` seconds for the first report."""
        done: list[StepResult] = []
        wait = timeout
        while True:
            try:
                result: RankResult = self.results.get(timeout=wait) if wait > 0 else \
                    self.results.get_nowait()
            except queue.Empty:
                self._check_alive()
                return done
            wait = 0.0
            self.pools[result.rank].release(result.slot)
            entry = self.outstanding[result.batch_id]
            entry.acks.add(result.rank)
            if result.rank == 0:
                entry.rank0 = result
            if len(entry.acks) == self.dp and entry.rank0 is not None:
                del self.outstanding[result.batch_id]
                r0 = entry.rank0
                done.append(StepResult(r0.batch_id, r0.version, r0.metrics, r0.weight_slot,
                                       r0.weight_specs, r0.ipc_handles))

    def weights(self, result: StepResult) -> dict[str, torch.Tensor]:
        """Named views of the weight slot rank 0 wrote for `result` (valid until v + 2); on
        CUDA, rank 0's device snapshot itself, opened from its IPC handles (no copy)."""
        if result.ipc_handles is not None:
            with flowmap.owner("weight_sync"):  # the receive halves of the cuda_ipc hops
                return open_handles(result.ipc_handles)
        return shm_pool.read(self.weight_slots[result.weight_slot], result.weight_specs)

    def _check_alive(self) -> None:
        # join(0) raises with the rank's traceback when one has failed.
        self.context.join(timeout=0)
        if not all(p.is_alive() for p in self.context.processes):
            raise RuntimeError("a trainer rank exited unexpectedly; see its error above")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with flowmap.owner("driver"):
            for q in self.jobs:
                q.put(Job("stop"))
        for p in self.context.processes:
            p.join(timeout=20)
            if p.is_alive():
                p.terminate()
        shutil.rmtree(self.store_dir, ignore_errors=True)

    def __enter__(self) -> TrainerGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

