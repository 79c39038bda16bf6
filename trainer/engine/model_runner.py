"""Sequences -> tensors -> one forward pass over the paged KV cache -> sampled tokens.

Owns the physical KV cache. All scheduled sequences, prefilling or decoding,
go through a single `forward_paged` call per step: their new tokens are
concatenated (no padding in the linear layers), and attention gathers each
sequence's context from its block table, decoding and prefilling sequences in
separate groups so neither pads to the other's shape.

With DSA the cache also holds each token's indexer key (next to its K/V, same
slot); with `return_replay` a `ReplayCache` records each slot's selections and
every step copies the scheduled sequences' new rows into them.
"""

from __future__ import annotations

import torch
from torch import Tensor

from flowmap.trainer.attention import AttentionGroup, PagedBatch, PagedCache
from flowmap.trainer.device import moved
from flowmap.trainer.engine.config import EngineConfig
from flowmap.trainer.engine.replay_cache import ReplayCache
from flowmap.trainer.engine.sampling import sample
from flowmap.trainer.engine.sequence import Sequence
from flowmap.trainer.model import TinyLM


class KVCacheReleasedError(RuntimeError):
    """The engine stepped while its KV cache was released (resume_kv_cache() first)."""


class ModelRunner:
    def __init__(self, model: TinyLM, config: EngineConfig, generator: torch.Generator) -> None:
        self.model = model
        self.block_size = config.block_size
        self.generator = generator  # stream of the sequences that bring no seed
        self.num_kv_slots = config.num_kv_slots
        self.kv_cache_dtype = next(model.parameters()).dtype
        # The model's device: the KV cache lives there, the step's index tensors go there, and
        # sampling stays on the host (the seeded CPU generators; tokens are read there anyway).
        self.device = next(model.parameters()).device
        self.kv_cache: PagedCache | None = None  # K/V (+ DSA index keys) of every slot
        self.replay_cache = (
            ReplayCache(model.cfg, config.num_kv_slots, config.block_size)
            if config.return_replay and (model.cfg.has_moe or model.cfg.has_dsa)
            else None
        )
        self.resume_kv_cache()

    @property
    def kv_cache_released(self) -> bool:
        return self.kv_cache is None

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes of the KV pool (with DSA index keys) when allocated; the layout stays while released."""
        shapes = [self.model.kv_cache_shape(self.num_kv_slots)]
        index_shape = self.model.index_cache_shape(self.num_kv_slots)
        if index_shape is not None:
            shapes.append(index_shape)
        return sum(torch.Size(s).numel() for s in shapes) * self.kv_cache_dtype.itemsize

    def release_kv_cache(self) -> None:
        self.kv_cache = None  # the last reference: the storage is freed here
        if self.replay_cache is not None:
            self.replay_cache.release()  # sequences keep the rows already copied to them

    def resume_kv_cache(self) -> None:
        if self.kv_cache is None:
            self.kv_cache = self.model.new_paged_cache(self.num_kv_slots, self.kv_cache_dtype,
                                                       self.device)
        if self.replay_cache is not None:
            self.replay_cache.resume()

    @torch.inference_mode()
    def run(self, seqs: list[Sequence]) -> tuple[list[int], list[float]]:
        """Compute every scheduled sequence's new tokens; sample one next token for each."""
        if self.kv_cache is None:
            raise KVCacheReleasedError("the KV cache is released; call resume_kv_cache() first")
        input_ids, positions, batch = self.prepare(seqs)
        if self.device.type != "cpu":
            input_ids, positions = input_ids.to(self.device), positions.to(self.device)
            batch = moved(batch, self.device)
        logits, selections = self.model.forward_paged(input_ids, positions, batch, self.kv_cache)
        if self.device.type != "cpu":
            logits = logits.float().cpu()  # (B, V): one copy per step, as engines return tokens
        if self.replay_cache is not None:
            self.replay_cache.write(batch.slot_mapping, selections)
            self.replay_cache.record(seqs)
        return sample(logits, [s.params for s in seqs], [s.generator for s in seqs], self.generator)

    def prepare(self, seqs: list[Sequence]) -> tuple[Tensor, Tensor, PagedBatch]:
        """Flatten the sequences' uncached tokens and describe where their K/V live."""
        bs = self.block_size
        input_ids: list[int] = []
        positions: list[int] = []
        slot_mapping: list[int] = []
        starts: list[int] = []  # index in N of each sequence's first new token
        for seq in seqs:
            starts.append(len(input_ids))
            new = range(seq.num_cached_tokens, len(seq))
            input_ids += seq.token_ids[new.start :]
            positions += new
            slot_mapping += [seq.block_table[p // bs] * bs + p % bs for p in new]
        decoding = [i for i, s in enumerate(seqs) if s.num_new_tokens == 1]
        prefilling = [i for i, s in enumerate(seqs) if s.num_new_tokens > 1]
        groups = [
            self._attention_group(seqs, members, starts, whole=len(members) == len(seqs))
            for members in (decoding, prefilling)
            if members
        ]
        batch = PagedBatch(
            slot_mapping=torch.tensor(slot_mapping),
            groups=groups,
            last_index=torch.tensor(
                [s + q.num_new_tokens - 1 for s, q in zip(starts, seqs, strict=True)]
            ),
        )
        return torch.tensor(input_ids), torch.tensor(positions), batch

    def _attention_group(
        self, seqs: list[Sequence], members: list[int], starts: list[int], whole: bool
    ) -> AttentionGroup:
        bs = self.block_size
        group = [seqs[i] for i in members]
        num_queries = max(s.num_new_tokens for s in group)  # Q_g
        context_len = max(len(s) for s in group)  # C_g
        max_blocks = -(-context_len // bs)
        tables = torch.tensor(
            [s.block_table + [0] * (max_blocks - len(s.block_table)) for s in group]
        )
        slots = tables[:, :, None] * bs + torch.arange(bs)  # (B_g, max_blocks, bs)
        context_slots = slots.view(len(group), -1)[:, :context_len]  # (B_g, C_g)
        if num_queries == 1:
            query_index = None
            q_pos = torch.tensor([len(s) - 1 for s in group])[:, None]  # (B_g, 1)
        else:
            index = [
                b * num_queries + j for b, s in enumerate(group) for j in range(s.num_new_tokens)
            ]
            query_index = torch.tensor(index)
            q_pos = torch.zeros(len(group) * num_queries, dtype=torch.long)
            # Padded queries sit at position 0: they see one real slot, so no row is all -inf.
            q_pos[query_index] = torch.tensor(
                [p for s in group for p in range(s.num_cached_tokens, len(s))]
            )
            q_pos = q_pos.view(len(group), num_queries)  # (B_g, Q_g)
        # Context index j is token position j, so causality is j <= the query's position.
        attn_mask = torch.arange(context_len)[None, None, :] <= q_pos[:, :, None]  # (B_g, Q_g, C_g)
        token_index = None
        if not whole:
            token_index = torch.tensor(
                [t for i in members for t in range(starts[i], starts[i] + seqs[i].num_new_tokens)]
            )
        return AttentionGroup(token_index, query_index, context_slots, attn_mask[:, None])
