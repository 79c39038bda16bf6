"""One sequence's state: its tokens, where its K/V live, and why it stopped.

A state object with plain fields and derived properties; the scheduler and the
block manager mutate it (nano-vllm's split). One request with `n` samples is
`n` sequences, each collected on its own when it finishes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch
from torch import Tensor

from flowmap.trainer.engine.sampling import SamplingParams


class SequenceStatus(enum.Enum):
    WAITING = "waiting"  # queued, holds no KV blocks (new, or preempted for recompute)
    RUNNING = "running"  # holds KV blocks, advances one token per step
    FINISHED = "finished"


@dataclass
class RequestOutput:
    """What the engine hands back for one sequence (finished, aborted or withdrawn by a pause)."""

    request_id: str  # with n > 1, the i-th sample's id is f"{request_id}#{i}"
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    logprobs: list[float]  # one per output token, under log_softmax(logits / temperature)
    finish_reason: str  # "stop" | "length" | "abort" | "paused"
    weight_version: int  # the engine's weight version when it finished or was withdrawn
    # With EngineConfig.return_replay, the selections of every position the model ran for this
    # sequence: row p = position p, p < len(prompt + output) - 1 (rows stop before the last
    # sampled token; a request withdrawn before it ever ran has 0 rows). None when off.
    routed_experts: Tensor | None = None  # (rows, layers, moe_top_k) int32
    indexer_topk: Tensor | None = None  # (rows, layers, dsa_index_topk) int32, -1 padded


class ReplayRows:
    """One sequence's recorded selections, row p = position p, kept across preemption.

    Rows are only ever appended: a position recomputed after preemption or a
    weight update keeps the row recorded first, the one whose selections
    produced the next token's log-prob.
    """

    __slots__ = ("num_rows", "experts", "kept")

    def __init__(self, experts: Tensor | None, kept: Tensor | None) -> None:
        self.num_rows = 0
        self.experts = [] if experts is None else [experts]  # chunks (n, L, k); first is empty
        self.kept = [] if kept is None else [kept]  # chunks (n, L, K)

    def append(self, experts: Tensor | None, kept: Tensor | None, num_rows: int) -> None:
        if experts is not None:
            self.experts.append(experts)
        if kept is not None:
            self.kept.append(kept)
        self.num_rows += num_rows

    def routed_experts(self) -> Tensor | None:
        return torch.cat(self.experts) if self.experts else None

    def indexer_topk(self) -> Tensor | None:
        return torch.cat(self.kept) if self.kept else None


class Sequence:
    """Tokens so far (prompt + output), the blocks holding their K/V, and per-token log-probs."""

    __slots__ = (
        "seq_id",
        "request_id",
        "token_ids",
        "num_prompt_tokens",
        "num_cached_tokens",
        "block_table",
        "block_hashes",
        "logprobs",
        "params",
        "generator",
        "status",
        "finish_reason",
        "replay_rows",
    )

    def __init__(
        self,
        seq_id: int,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        generator: torch.Generator | None = None,
    ) -> None:
        self.seq_id = seq_id  # arrival order, engine-wide: ties and output order follow it
        self.request_id = request_id
        self.token_ids = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.num_cached_tokens = 0  # leading tokens whose K/V are in the cache
        self.block_table: list[
            int
        ] = []  # block i holds tokens [i * block_size, (i + 1) * block_size)
        self.block_hashes: list[
            int
        ] = []  # chained hash of each full, computed block (prefix cache)
        self.logprobs: list[float] = []
        self.params = params
        self.generator = generator  # None: draw from the engine's stream
        self.status = SequenceStatus.WAITING
        self.finish_reason: str | None = None
        # Recorded selections, one (rows, L, k) chunk per step; set by the engine when replay is on.
        self.replay_rows: ReplayRows | None = None

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def num_new_tokens(self) -> int:
        """Tokens the next step must compute: the whole prompt at first, one token while decoding."""
        return len(self.token_ids) - self.num_cached_tokens

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def append_token(self, token_id: int, logprob: float) -> None:
        self.token_ids.append(token_id)
        self.logprobs.append(logprob)

    def to_output(self, finish_reason: str, weight_version: int) -> RequestOutput:
        rows = self.replay_rows
        return RequestOutput(
            request_id=self.request_id,
            prompt_token_ids=self.prompt_token_ids,
            output_token_ids=self.output_token_ids,
            logprobs=list(self.logprobs),
            finish_reason=finish_reason,
            weight_version=weight_version,
            routed_experts=None if rows is None else rows.routed_experts(),
            indexer_topk=None if rows is None else rows.indexer_topk(),
        )

    def __repr__(self) -> str:
        return (
            f"Sequence({self.request_id!r}, {self.status.value}, tokens={len(self)}, "
            f"cached={self.num_cached_tokens}, blocks={self.block_table})"
        )
