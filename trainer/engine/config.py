"""The rollout engine's sizes, validated once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class EngineConfig:
    """Capacity of one engine instance.

    KV memory is num_kv_blocks * block_size token slots, shared by all running
    sequences; a sequence holds ceil(len / block_size) blocks, so short outputs
    leave room for more concurrent sequences than max-length slabs would.
    """

    num_kv_blocks: int = 256  # 4,096 token slots: 32 sequences of 128 tokens at once
    block_size: int = 16  # tokens per block; smaller wastes less of a last block, costs more table
    max_num_seqs: int = (
        32  # sequences in one step's batch (waiting + running are admitted up to it)
    )
    max_num_batched_tokens: int = 1024  # new tokens per step (prefills + one per decode)
    enable_prefix_caching: bool = True  # share computed full blocks between equal prefixes
    # Hand back each sequence's MoE routing / DSA indexer selections (RequestOutput.routed_experts,
    # .indexer_topk) for training to replay; costs a per-slot record next to the KV cache.
    return_replay: bool = False

    def __post_init__(self) -> None:
        for name in ("num_kv_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"EngineConfig.{name} must be a positive int, got {value!r}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"EngineConfig.max_num_batched_tokens ({self.max_num_batched_tokens}) must be at "
                f"least max_num_seqs ({self.max_num_seqs}): every running sequence decodes one token"
            )

    @property
    def num_kv_slots(self) -> int:
        return self.num_kv_blocks * self.block_size
