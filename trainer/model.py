"""TinyLM: a small decoder-only transformer with two ways in.

`forward` is the plain, padded, full-recompute pass the trainer uses (and the
reference the rollout engine is tested against). `forward_paged` is the rollout
engine's pass: only the tokens not yet in the KV cache are computed, their K/V
are written into a paged cache and attention gathers each sequence's context
through its block table. Both run the same weights through the same modules, so
the engine's log-probs equal the trainer's up to float rounding.

Pre-norm blocks (GPT-2 style), learned absolute positions. Issue 6 adds an MoE
feed-forward (top-k router) and DSA-style sparse attention (an indexer picking
top-k keys); `Block.ffn` and `CausalSelfAttention` are the places they plug in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(slots=True)
class ModelConfig:
    """Sizes of TinyLM; the defaults learn the toy tasks in about a minute on 2 CPU cores."""

    vocab_size: int
    max_seq_len: int = 128  # prompt + response; rows of the learned position table
    d_model: int = 64  # wide enough for the toy tasks, small enough for millisecond CPU steps
    n_layers: int = 2
    n_heads: int = 4  # head_dim 16
    d_ff: int = 256  # 4 * d_model, GPT-2's ratio

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_seq_len", "d_model", "n_layers", "n_heads", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive int, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"ModelConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


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


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.head_dim = cfg.head_dim
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: Tensor, attn_mask: Tensor) -> Tensor:
        B, T, D = x.shape
        # (B, T, 3D) -> (B, T, 3, nh, hs) -> (3, B, nh, T, hs)
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).reshape(B, T, D))

    def forward_paged(self, x: Tensor, batch: PagedBatch, kv_cache: Tensor) -> Tensor:
        """x (N, D) new tokens; kv_cache (2, num_slots, nh, hs) this layer's K|V, written in place."""
        N, D = x.shape
        qkv = self.qkv(x).view(N, 3, self.n_heads, self.head_dim)  # (N, 3, nh, hs)
        # Write first: a new token attends to itself and to the other new tokens of its sequence.
        kv_cache[:, batch.slot_mapping] = qkv[:, 1:].transpose(0, 1)  # (2, N, nh, hs)
        q = qkv[:, 0]  # (N, nh, hs)
        y = q if len(batch.groups) == 1 else torch.empty_like(q)  # (N, nh, hs)
        for group in batch.groups:
            if group.token_index is None:
                y = self._attend_group(q, group, kv_cache)
            else:
                y[group.token_index] = self._attend_group(q[group.token_index], group, kv_cache)
        return self.proj(y.reshape(N, D))

    def _attend_group(self, q: Tensor, group: AttentionGroup, kv_cache: Tensor) -> Tensor:
        """q (N_g, nh, hs) -> attention output (N_g, nh, hs) over each sequence's context."""
        B, _, Q, _ = group.attn_mask.shape
        nh, hs = self.n_heads, self.head_dim
        # One gather for K and V: (2, B, C, nh, hs) -> 2 x (B, nh, C, hs)
        k_ctx, v_ctx = kv_cache[:, group.context_slots].transpose(2, 3).unbind(0)
        if group.query_index is None:  # one query per sequence: no padding needed
            q_pad = q.view(B, 1, nh, hs)
        else:
            q_pad = q.new_zeros(B * Q, nh, hs)
            q_pad[group.query_index] = q
            q_pad = q_pad.view(B, Q, nh, hs)
        y = F.scaled_dot_product_attention(
            q_pad.transpose(1, 2), k_ctx, v_ctx, attn_mask=group.attn_mask
        )  # (B, nh, Q, hs)
        y = y.transpose(1, 2).reshape(B * Q, nh, hs)  # (B, Q, nh, hs) -> (B * Q, nh, hs)
        return y if group.query_index is None else y[group.query_index]


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.d_ff)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ffn = MLP(cfg)  # issue 6: an MoE feed-forward with a top-k router goes here

    def forward(self, x: Tensor, attn_mask: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x), attn_mask)
        return x + self.ffn(self.ln2(x))

    def forward_paged(self, x: Tensor, batch: PagedBatch, kv_cache: Tensor) -> Tensor:
        x = x + self.attn.forward_paged(self.ln1(x), batch, kv_cache)
        return x + self.ffn(self.ln2(x))


class TinyLM(nn.Module):
    """Decoder-only transformer; `forward` for training, `forward_paged` for the rollout engine."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(
            cfg.d_model, cfg.vocab_size, bias=False
        )  # untied: one name per tensor

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> Tensor:
        """Logits (B, T, V) for input_ids (B, T); attention_mask 1 = real token, 0 = pad.

        Pads are masked as keys, so left-padded prompts followed by right-padded
        responses give every real token the same logits it would have unpadded.
        Positions default to the count of real tokens before each one.
        """
        B, T = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones(B, T, dtype=torch.bool, device=input_ids.device)
        real = attention_mask.bool()
        if position_ids is None:
            position_ids = (real.long().cumsum(-1) - 1).clamp(min=0)  # (B, T)
        self._check_positions(position_ids)
        causal = torch.ones(T, T, dtype=torch.bool, device=input_ids.device).tril()
        attn_mask = causal[None, None] & real[:, None, None, :]  # (B, 1, T, T): query i sees key j
        # A pad query sees itself, so its softmax row is never all -inf (NaN); its output is unused.
        attn_mask = attn_mask | torch.eye(T, dtype=torch.bool, device=input_ids.device)
        x = self.tok_emb(input_ids) + self.pos_emb(position_ids)  # (B, T, D)
        for block in self.blocks:
            x = block(x, attn_mask)
        return self.lm_head(self.norm_f(x))  # (B, T, V)

    def forward_paged(
        self, input_ids: Tensor, positions: Tensor, batch: PagedBatch, kv_cache: Tensor
    ) -> Tensor:
        """Logits (B, V) of each sequence's last new token.

        input_ids, positions (N,): the new tokens of all sequences, concatenated.
        kv_cache: a tensor shaped by `kv_cache_shape`, updated in place.
        """
        self._check_positions(positions)
        x = self.tok_emb(input_ids) + self.pos_emb(positions)  # (N, D)
        for i, block in enumerate(self.blocks):
            x = block.forward_paged(x, batch, kv_cache[i])
        x = x[batch.last_index]  # (B, D): only the last token of each sequence samples
        return self.lm_head(self.norm_f(x))  # (B, V)

    def kv_cache_shape(self, num_slots: int) -> tuple[int, ...]:
        """Layout of a paged KV cache holding `num_slots` tokens: (layers, K|V, slots, nh, hs)."""
        return (self.cfg.n_layers, 2, num_slots, self.cfg.n_heads, self.cfg.head_dim)

    def _check_positions(self, positions: Tensor) -> None:
        if positions.numel() and int(positions.max()) >= self.cfg.max_seq_len:
            raise ValueError(
                f"position {int(positions.max())} is beyond max_seq_len={self.cfg.max_seq_len}; "
                "shorten the sequence or raise ModelConfig.max_seq_len"
            )


def _init_weights(module: nn.Module, n_layers: int) -> None:
    # GPT-2's init; residual projections scaled by 1/sqrt(2 * n_layers) so the stream stays O(1).
    for name, p in module.named_parameters():
        if p.dim() < 2:
            nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
        elif name.endswith(("proj.weight", "down.weight")):
            nn.init.normal_(p, std=0.02 / math.sqrt(2 * n_layers))
        else:
            nn.init.normal_(p, std=0.02)


def build_model(cfg: ModelConfig, seed: int) -> TinyLM:
    """A TinyLM whose weights depend only on `cfg` and `seed` (the global RNG is left untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyLM(cfg)
        _init_weights(model, cfg.n_layers)
    return model
