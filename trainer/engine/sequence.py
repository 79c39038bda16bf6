"""One sequence's state: its tokens, where its K/V live, and why it stopped.

A state object with plain fields and derived properties; the scheduler and the
block manager mutate it (nano-vllm's split). One request with `n` samples is
`n` sequences, each collected on its own when it finishes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

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
        return RequestOutput(
            request_id=self.request_id,
            prompt_token_ids=self.prompt_token_ids,
            output_token_ids=self.output_token_ids,
            logprobs=list(self.logprobs),
            finish_reason=finish_reason,
            weight_version=weight_version,
        )

    def __repr__(self) -> str:
        return (
            f"Sequence({self.request_id!r}, {self.status.value}, tokens={len(self)}, "
            f"cached={self.num_cached_tokens}, blocks={self.block_table})"
        )
