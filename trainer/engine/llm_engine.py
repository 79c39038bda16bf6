"""The rollout engine: requests in, one scheduler step at a time, finished sequences out.

`step()` wires the parts: the scheduler picks the batch, the model runner
computes it against the paged KV cache and samples, the scheduler records the
tokens and frees what finished. Around it sit the RL controls a weight sync
drives (pause -> release KV -> update weights -> resume KV -> continue); each
is idempotent, so a retried call after a failure is always safe.

With `EngineConfig(return_replay=True)` and a MoE or DSA model, every
RequestOutput carries the selections of the positions the model ran for it
(`routed_experts`, `indexer_topk`; conventions in `flowmap.trainer.replay`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable

import torch

import flowmap
from flowmap.trainer.engine.block_manager import BlockManager
from flowmap.trainer.engine.config import EngineConfig
from flowmap.trainer.engine.model_runner import KVCacheReleasedError, ModelRunner
from flowmap.trainer.engine.sampling import SamplingParams, sample_generator
from flowmap.trainer.engine.scheduler import Scheduler
from flowmap.trainer.engine.sequence import RequestOutput, Sequence, SequenceStatus
from flowmap.trainer.model import TinyLM


class LLMEngine:
    """One rollout engine instance with its own model copy, KV cache and random stream."""

    def __init__(self, model: TinyLM, config: EngineConfig, *, instance: int = 0,
                 device: torch.device | str = "cpu") -> None:
        self.config = config
        self.instance = instance
        # Its own copy: the trainer keeps optimising its model; only update_weights changes this one.
        self.model = copy.deepcopy(model).eval().requires_grad_(False).to(device)
        self.max_seq_len = model.cfg.max_seq_len
        self.weight_version = 0
        self.block_manager = BlockManager(
            config.num_kv_blocks, config.block_size, config.enable_prefix_caching
        )
        self.scheduler = Scheduler(config, self.block_manager, self.max_seq_len)
        self.model_runner = ModelRunner(
            self.model, config, torch.Generator().manual_seed(0x5EED + instance)
        )
        self.paused = False
        self._seqs: dict[str, Sequence] = {}  # unfinished sequences by id
        self._next_seq_id = 0

    # -- requests ------------------------------------------------------------------

    def add_request(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> None:
        """Queue a request; with params.n > 1 it becomes n sequences f"{request_id}#{i}"."""
        ids = [request_id] if params.n == 1 else [f"{request_id}#{i}" for i in range(params.n)]
        self._check_request(request_id, ids, prompt_token_ids, params)
        for i, seq_request_id in enumerate(ids):
            generator = None if params.seed is None else sample_generator(params.seed, i)
            seq = Sequence(self._next_seq_id, seq_request_id, prompt_token_ids, params, generator)
            if self.model_runner.replay_cache is not None:
                seq.replay_rows = self.model_runner.replay_cache.new_rows()
            self._next_seq_id += 1
            self._seqs[seq_request_id] = seq
            self.scheduler.add(seq)

    def _check_request(
        self, request_id: str, ids: list[str], prompt: list[int], params: SamplingParams
    ) -> None:
        clash = [r for r in ids if r in self._seqs]
        if clash:
            raise ValueError(f"request {clash[0]!r} is still unfinished; use a fresh request_id")
        if not prompt:
            raise ValueError(f"request {request_id!r} has an empty prompt; give at least one token")
        vocab_size = self.model.cfg.vocab_size
        if min(prompt) < 0 or max(prompt) >= vocab_size:
            raise ValueError(f"request {request_id!r} has token ids outside [0, {vocab_size})")
        if len(prompt) >= self.max_seq_len:
            raise ValueError(
                f"request {request_id!r}: prompt of {len(prompt)} tokens leaves no room under "
                f"max_seq_len={self.max_seq_len}"
            )
        # The longest the sequence gets while still running; a preempted one is prefilled whole.
        longest = min(len(prompt) + params.max_tokens, self.max_seq_len) - 1
        if longest > self.config.max_num_batched_tokens:
            raise ValueError(
                f"request {request_id!r} can grow to {longest} tokens, more than "
                f"max_num_batched_tokens={self.config.max_num_batched_tokens}; raise it or lower max_tokens"
            )
        if self.block_manager.num_blocks_for(longest) > self.config.num_kv_blocks:
            raise ValueError(
                f"request {request_id!r} can grow to {longest} tokens, more than the KV pool's "
                f"{self.config.num_kv_slots} slots; raise num_kv_blocks or lower max_tokens"
            )

    def step(self) -> list[RequestOutput]:
        """Run one scheduler step; return the sequences that finished in it."""
        if self.model_runner.kv_cache_released:
            raise KVCacheReleasedError(
                f"engine {self.instance}: the KV cache is released; call resume_kv_cache() "
                "before step()"
            )
        outputs: list[RequestOutput] = []
        seqs = [] if self.paused else self.scheduler.schedule()
        if seqs:
            token_ids, logprobs = self.model_runner.run(seqs)
            for seq in self.scheduler.postprocess(seqs, token_ids, logprobs):
                outputs.append(self._finish(seq, seq.finish_reason or "stop"))
        flowmap.counter("kv_blocks_used", self.kv_blocks_used)
        return outputs

    def has_unfinished_requests(self) -> bool:
        return bool(self._seqs)

    def num_unfinished_requests(self) -> int:
        """Sequences waiting or running (n > 1 requests count n)."""
        return self.scheduler.num_unfinished_seqs

    def free_capacity(self) -> int:
        """How many more sequences could be admitted now without queueing."""
        return max(0, self.config.max_num_seqs - self.scheduler.num_unfinished_seqs)

    def abort(self, request_id: str) -> RequestOutput | None:
        """Stop one sequence (an id as returned in RequestOutput); None if it is not unfinished."""
        seq = self._seqs.get(request_id)
        if seq is None:
            return None
        self.scheduler.remove(seq)
        return self._finish(seq, "abort")

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[RequestOutput]:
        """Run the prompts to completion; outputs in prompt order (then sample order)."""
        if self._seqs:
            raise RuntimeError("generate() needs an idle engine; drain it with step() first")
        if self.paused:
            raise RuntimeError("generation is paused; call continue_generation() first")
        ids = [f"generate-{k}" for k in range(len(prompts))]
        for request_id, prompt in zip(ids, prompts, strict=True):
            self.add_request(request_id, prompt, params)
        outputs: dict[str, RequestOutput] = {}
        while self.has_unfinished_requests():
            outputs.update((out.request_id, out) for out in self.step())
        return sorted(outputs.values(), key=lambda o: _generate_order(o.request_id))

    def _finish(self, seq: Sequence, reason: str) -> RequestOutput:
        seq.status = SequenceStatus.FINISHED
        del self._seqs[seq.request_id]
        return seq.to_output(reason, self.weight_version)

    # -- RL controls (idempotent) --------------------------------------------------

    def pause_generation(self) -> list[RequestOutput]:
        """Stop scheduling and hand back every unfinished sequence with its partial output.

        finish_reason is "paused"; resubmit `prompt + output` (see `continuation`)
        to finish one. A second call finds nothing left and returns [].
        """
        self.paused = True
        return [self._finish(seq, "paused") for seq in self.scheduler.withdraw_all()]

    def release_kv_cache(self) -> None:
        """Free the KV tensors, keep the pool's layout; running sequences fall back to recompute."""
        self.scheduler.preempt_all_running()  # nothing may point into memory that is gone
        self.block_manager.reset_prefix_cache()
        self.model_runner.release_kv_cache()

    def update_weights(
        self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int
    ) -> None:
        """Load tensors (names as in `model.named_parameters()`) into the engine's copy.

        All names and shapes are checked before anything is copied, so a bad
        update leaves the old weights whole. Versions only go up: the same
        version again with the same tensors is a no-op (a retried sync), with
        different tensors, or a lower version, is refused with a ValueError.
        Sequences still running keep the K/V they computed under the old weights
        and continue under the new ones; pause first for a clean cut.
        """
        params = dict(self.model.named_parameters())
        updates = list(named_tensors)
        if version < self.weight_version:
            raise ValueError(
                f"update_weights: version {version} is older than the engine's "
                f"{self.weight_version}; weight versions only go up"
            )
        if version == self.weight_version:
            changed = [n for n, t in updates if n in params and not torch.equal(params[n], t)]
            if changed:
                raise ValueError(
                    f"update_weights: version {version} is already loaded with different "
                    f"weights ({changed[0]!r} differs); a new set of weights needs a new version"
                )
            return
        for name, tensor in updates:
            if name not in params:
                raise KeyError(f"update_weights: the engine's model has no parameter {name!r}")
            if tuple(tensor.shape) != tuple(params[name].shape):
                raise ValueError(
                    f"update_weights: {name!r} has shape {tuple(tensor.shape)}, "
                    f"the engine expects {tuple(params[name].shape)}"
                )
        with torch.no_grad():
            for name, tensor in updates:
                params[name].copy_(tensor)
        self.block_manager.reset_prefix_cache()  # cached K/V came from the old weights
        self.weight_version = version

    def resume_kv_cache(self) -> None:
        """Allocate the KV tensors again, same layout as before."""
        self.model_runner.resume_kv_cache()

    def continue_generation(self) -> None:
        self.paused = False

    # -- accounting ----------------------------------------------------------------

    @property
    def kv_blocks_used(self) -> int:
        return self.block_manager.num_used_blocks

    @property
    def num_kv_blocks(self) -> int:
        return self.block_manager.num_blocks

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes of the KV pool (whether or not it is currently allocated)."""
        return self.model_runner.kv_cache_bytes


def continuation(output: RequestOutput, params: SamplingParams) -> tuple[list[int], SamplingParams]:
    """Prompt and params that finish a paused sequence: its output so far becomes prompt.

    The caller keeps output.output_token_ids and output.logprobs and appends
    what the resubmitted request returns.
    """
    remaining = params.max_tokens - len(output.output_token_ids)
    if remaining < 1:
        raise ValueError(f"{output.request_id!r} already has max_tokens output tokens")
    prompt = output.prompt_token_ids + output.output_token_ids
    return prompt, dataclasses.replace(params, n=1, max_tokens=remaining)


def _generate_order(request_id: str) -> tuple[int, int]:
    # "generate-<prompt index>[#<sample index>]"
    prompt_index, _, sample_index = request_id.removeprefix("generate-").partition("#")
    return int(prompt_index), int(sample_index or 0)
