"""Attention of TinyLM, both ways in: a padded batch (`forward`) and the paged KV cache.

The padded pass builds its masks once per batch (`DenseMasks`); the engine's
paged pass writes each new token's K/V into its cache slot and gathers every
sequence's context through its block table, one `AttentionGroup` at a time
(decodes and prefills apart, so neither pads to the other). With DSA, a
lightning indexer first keeps the top-k past positions per query, and a
given selection (R3) can replace its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from flowmap.trainer.sparse_attention import LightningIndexer

if TYPE_CHECKING:
    from flowmap.trainer.model_config import ModelConfig


@dataclass(slots=True)
class AttentionGroup:
    """Sequences that attend together, padded only to their own longest query run and context.

    The engine puts decoding sequences (one new token each) in one group and
    prefilling ones in another, so a 24-token prefill does not pad every
    decode's query to 24. B_g sequences, N_g new tokens, Q_g = the longest run
    of new tokens, C_g = the longest context (cached plus new tokens).
    """

    # (N_g,) which of the step's N new tokens are here; None = all of them, in order
    token_index: Tensor | None
    # (N_g,) their places in the padded (B_g * Q_g) query layout; None when Q_g == 1
    query_index: Tensor | None
    context_slots: Tensor  # (B_g, C_g) cache slots of tokens 0..C_g-1; padding -> slot 0, masked
    attn_mask: Tensor  # (B_g, 1, Q_g, C_g) bool: True where a query may attend a context token


@dataclass(slots=True)
class PagedBatch:
    """Where one engine step's new tokens go in the paged KV cache, and what each may see.

    N = new tokens of all scheduled sequences, concatenated; B = sequences.
    A cache "slot" is one token's K/V: slot = block_id * block_size + offset.
    """

    slot_mapping: Tensor  # (N,) slot that receives each new token's K/V
    groups: list[AttentionGroup]  # every new token is in exactly one group
    last_index: Tensor  # (B,) index into N of each sequence's last new token (predicts the next)


@dataclass(slots=True)
class PagedCache:
    """The engine's per-token caches, indexed by slot and written in place by `forward_paged`."""

    kv: Tensor  # (L, 2, slots, nh, hs) K|V of every layer
    index_keys: Tensor | None = None  # (L, slots, d_I) DSA indexer keys; None without DSA


@dataclass(slots=True)
class DenseMasks:
    """What each query of a padded (B, T) batch may see; `forward` builds it once for all layers."""

    attn_mask: Tensor  # (B, 1, T, T) causal over real keys; a pad query sees itself (no NaN row)
    positions: Tensor  # (B, T) token positions (what indexer selections are recorded as)
    visible: Tensor | None = None  # (B, T, T) causal over real keys: the indexer's candidates
    pad_self: Tensor | None = None  # (B, T, T) a pad query's only key, itself


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.head_dim = cfg.head_dim
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.indexer = (
            LightningIndexer(
                cfg.d_model, cfg.dsa_index_dim, cfg.dsa_index_heads, cfg.dsa_index_topk,
                cfg.router_noise,
            )
            if cfg.has_dsa
            else None
        )

    def forward(
        self, x: Tensor, masks: DenseMasks, replay: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D) -> (output (B, T, D), kept positions (B, T, K) int32 or None without DSA).

        replay (B, T, K): positions to keep instead of the indexer's choice.
        """
        B, T, D = x.shape
        # (B, T, 3D) -> (B, T, 3, nh, hs) -> (3, B, nh, T, hs)
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        attn_mask, kept = masks.attn_mask, None
        if self.indexer is not None:
            assert masks.visible is not None and masks.pad_self is not None
            keep, kept = self.indexer.select(
                x, self.indexer.keys(x), masks.visible, masks.positions, replay
            )
            attn_mask = (keep | masks.pad_self)[:, None]  # (B, 1, T, T)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).reshape(B, T, D)), kept

    def forward_paged(
        self, x: Tensor, batch: PagedBatch, kv_cache: Tensor, index_keys: Tensor | None
    ) -> tuple[Tensor, Tensor | None]:
        """x (N, D) new tokens -> (output (N, D), kept positions (N, K) int32 or None).

        kv_cache (2, num_slots, nh, hs) and index_keys (num_slots, d_I) are this
        layer's caches, written in place.
        """
        N, D = x.shape
        qkv = self.qkv(x).view(N, 3, self.n_heads, self.head_dim)  # (N, 3, nh, hs)
        # Write first: a new token attends to itself and to the other new tokens of its sequence.
        kv_cache[:, batch.slot_mapping] = qkv[:, 1:].transpose(0, 1)  # (2, N, nh, hs)
        kept: Tensor | None = None
        if self.indexer is not None:
            assert index_keys is not None
            index_keys[batch.slot_mapping] = self.indexer.keys(x)  # (N, d_I)
            kept = torch.empty(N, self.indexer.topk, dtype=torch.int32, device=x.device)
        q = qkv[:, 0]  # (N, nh, hs)
        y = q if len(batch.groups) == 1 else torch.empty_like(q)  # (N, nh, hs)
        for group in batch.groups:
            rows = slice(None) if group.token_index is None else group.token_index
            attn_mask = group.attn_mask
            if self.indexer is not None:
                assert index_keys is not None and kept is not None
                keep, kept[rows] = self._index_group(x[rows], group, index_keys)
                attn_mask = keep[:, None]  # (B_g, 1, Q_g, C_g); keep is within the causal mask
            if group.token_index is None:
                y = self._attend_group(q, group, kv_cache, attn_mask)
            else:
                y[rows] = self._attend_group(q[rows], group, kv_cache, attn_mask)
        return self.proj(y.reshape(N, D)), kept

    def _attend_group(
        self, q: Tensor, group: AttentionGroup, kv_cache: Tensor, attn_mask: Tensor
    ) -> Tensor:
        """q (N_g, nh, hs) -> attention output (N_g, nh, hs) over each sequence's context."""
        # One gather for K and V: (2, B, C, nh, hs) -> 2 x (B, nh, C, hs)
        k_ctx, v_ctx = kv_cache[:, group.context_slots].transpose(2, 3).unbind(0)
        q_pad = _pad_queries(q, group)  # (B, Q, nh, hs)
        y = F.scaled_dot_product_attention(
            q_pad.transpose(1, 2), k_ctx, v_ctx, attn_mask=attn_mask
        )  # (B, nh, Q, hs)
        return _unpad_queries(y.transpose(1, 2), group)  # (B, Q, nh, hs) -> (N_g, nh, hs)

    def _index_group(
        self, x: Tensor, group: AttentionGroup, index_keys: Tensor
    ) -> tuple[Tensor, Tensor]:
        """x (N_g, D) -> keep (B, Q, C) bool, kept positions (N_g, K) int32."""
        assert self.indexer is not None
        B, _, _, C = group.attn_mask.shape
        keys = index_keys[group.context_slots]  # (B, C, d_I)
        key_positions = torch.arange(C, device=x.device).expand(B, C)  # context index j = position j
        keep, kept = self.indexer.select(
            _pad_queries(x, group), keys, group.attn_mask[:, 0], key_positions
        )
        return keep, _unpad_queries(kept, group)


def _pad_queries(t: Tensor, group: AttentionGroup) -> Tensor:
    """(N_g, ...) per new token -> (B_g, Q_g, ...) per sequence and query slot, zeros in padding."""
    B, _, Q, _ = group.attn_mask.shape
    if group.query_index is None:  # one query per sequence: no padding needed
        return t.view(B, 1, *t.shape[1:])
    padded = t.new_zeros(B * Q, *t.shape[1:])
    padded[group.query_index] = t
    return padded.view(B, Q, *t.shape[1:])


def _unpad_queries(t: Tensor, group: AttentionGroup) -> Tensor:
    """(B_g, Q_g, ...) -> (N_g, ...), the inverse of `_pad_queries`."""
    flat = t.reshape(t.shape[0] * t.shape[1], *t.shape[2:])  # (B_g * Q_g, ...)
    return flat if group.query_index is None else flat[group.query_index]
