"""The replay record next to the paged KV cache: each slot's token's selections.

Each step's forward pass returns the selections of the tokens it computed
(MoE experts, DSA kept positions); they are written to the slots those tokens'
K/V went to. A sequence's rows are then read back through its block table, for
every position it has no row for yet: the ones just computed, and the ones it
got from the prefix cache without computing (their rows were written by the
sequence that computed that block, under the same weights and tokens). Rows
are copied into the sequence (`ReplayRows`) every step, so preemption, a
released cache or a reused block never loses them.

Kept positions are token positions, not slots, so a row read through another
sequence's shared block means the same thing for this one.
"""

from __future__ import annotations

import torch
from torch import Tensor

from flowmap.trainer.engine.sequence import ReplayRows, Sequence
from flowmap.trainer.model import ModelConfig
from flowmap.trainer.replay import Replay


class ReplayCache:
    def __init__(self, cfg: ModelConfig, num_slots: int, block_size: int) -> None:
        self.block_size = block_size
        self.num_slots = num_slots
        L = cfg.n_layers
        self.experts_shape = (L, cfg.moe_top_k) if cfg.has_moe else None  # per slot
        self.kept_shape = (L, cfg.dsa_index_topk) if cfg.has_dsa else None  # per slot
        self.experts: Tensor | None = None  # (slots, L, k) int32
        self.kept: Tensor | None = None  # (slots, L, K) int32
        self.resume()

    @property
    def nbytes(self) -> int:
        per_slot = sum(
            torch.Size(shape).numel() for shape in (self.experts_shape, self.kept_shape) if shape
        )
        return per_slot * self.num_slots * torch.int32.itemsize

    def release(self) -> None:
        self.experts = self.kept = None

    def resume(self) -> None:
        if self.experts_shape and self.experts is None:
            self.experts = torch.full((self.num_slots, *self.experts_shape), -1, dtype=torch.int32)
        if self.kept_shape and self.kept is None:
            self.kept = torch.full((self.num_slots, *self.kept_shape), -1, dtype=torch.int32)

    def new_rows(self) -> ReplayRows:
        """An empty record for a new sequence (0 rows, the right trailing shape)."""
        return ReplayRows(
            *(
                None if shape is None else torch.empty(0, *shape, dtype=torch.int32)
                for shape in (self.experts_shape, self.kept_shape)
            )
        )

    def write(self, slot_mapping: Tensor, selections: Replay) -> None:
        """Store the step's selections, (N, L, k) and (N, L, K), at its new tokens' slots."""
        if self.experts is not None and selections.routed_experts is not None:
            self.experts[slot_mapping] = selections.routed_experts
        if self.kept is not None and selections.indexer_topk is not None:
            self.kept[slot_mapping] = selections.indexer_topk

    def record(self, seqs: list[Sequence]) -> None:
        """Append to each sequence the rows of its positions that now have selections cached."""
        bs = self.block_size
        slots: list[int] = []
        counts: list[int] = []
        for seq in seqs:
            assert seq.replay_rows is not None
            new = range(seq.replay_rows.num_rows, len(seq))  # every position up to here is computed
            slots += [seq.block_table[p // bs] * bs + p % bs for p in new]
            counts.append(len(new))
        index = torch.tensor(slots, dtype=torch.long)
        experts = None if self.experts is None else self.experts[index].split(counts)
        kept = None if self.kept is None else self.kept[index].split(counts)
        for i, seq in enumerate(seqs):
            assert seq.replay_rows is not None
            seq.replay_rows.append(
                None if experts is None else experts[i].clone(),
                None if kept is None else kept[i].clone(),
                counts[i],
            )
