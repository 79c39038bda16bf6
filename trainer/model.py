"""TinyLM: a small decoder-only transformer with two ways in.

`forward` is the plain, padded, full-recompute pass the trainer uses (and the
reference the rollout engine is tested against). `forward_paged` is the rollout
engine's pass: only the tokens not yet in the KV cache are computed, their K/V
are written into a paged cache and attention gathers each sequence's context
through its block table. Both run the same weights through the same modules, so
the engine's log-probs equal the trainer's up to float rounding.

Pre-norm blocks (GPT-2 style), learned absolute positions. Two options, off by
default: an MoE feed-forward (`moe.py`, a top-k router over small experts) and
DSA-style sparse attention (`sparse_attention.py`, a lightning indexer keeping
the top-k past positions per query). Both make hard selections; every pass
returns the selections it made (a `Replay`) and `forward` can be told to use
given ones instead (rollout routing replay, R3), see `replay.py`.
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from flowmap.trainer.attention import CausalSelfAttention, DenseMasks, PagedBatch, PagedCache
from flowmap.trainer.model_config import ModelConfig as ModelConfig  # its public home too
from flowmap.trainer.moe import MoE
from flowmap.trainer.replay import Replay


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.d_ff)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    """Pre-norm block; returns, with its output, the selections it made (None for dense parts)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ffn: MLP | MoE = (
            MoE(cfg.d_model, cfg.d_ff, cfg.moe_experts, cfg.moe_top_k, cfg.router_noise)
            if cfg.has_moe
            else MLP(cfg)
        )

    def forward(
        self, x: Tensor, masks: DenseMasks, replay: Replay | None = None
    ) -> tuple[Tensor, Replay]:
        """replay: this layer's selections to use, (B, T, k) and (B, T, K)."""
        h, kept = self.attn(self.ln1(x), masks, replay.indexer_topk if replay else None)
        x = x + h
        h, experts = self._ffn(self.ln2(x), replay.routed_experts if replay else None)
        return x + h, Replay(experts, kept)

    def forward_paged(
        self, x: Tensor, batch: PagedBatch, kv_cache: Tensor, index_keys: Tensor | None
    ) -> tuple[Tensor, Replay]:
        h, kept = self.attn.forward_paged(self.ln1(x), batch, kv_cache, index_keys)
        x = x + h
        h, experts = self._ffn(self.ln2(x), None)
        return x + h, Replay(experts, kept)

    def _ffn(self, x: Tensor, replay: Tensor | None) -> tuple[Tensor, Tensor | None]:
        if isinstance(self.ffn, MoE):
            return self.ffn(x, replay)
        return self.ffn(x), None


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
        replay: Replay | None = None,
    ) -> Tensor:
        """Logits (B, T, V) for input_ids (B, T); attention_mask 1 = real token, 0 = pad.

        Pads are masked as keys, so left-padded prompts followed by right-padded
        responses give every real token the same logits it would have unpadded.
        Positions default to the count of real tokens before each one.

        replay: rollout's selections, routed_experts (B, T, L, k) and indexer_topk
        (B, T, L, K) aligned with input_ids (see `replay.collate_replay`); each
        MoE layer and indexer uses them instead of choosing, except in rows of
        all -1. Gates and attention weights are still computed here, so gradients flow.
        """
        return self.forward_with_selections(input_ids, attention_mask, position_ids, replay)[0]

    def forward_with_selections(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        replay: Replay | None = None,
    ) -> tuple[Tensor, Replay]:
        """`forward`, plus the selections every layer used: (B, T, L, k) and (B, T, L, K)."""
        B, T = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones(B, T, dtype=torch.bool, device=input_ids.device)
        real = attention_mask.bool()
        if position_ids is None:
            position_ids = (real.long().cumsum(-1) - 1).clamp(min=0)  # (B, T)
        self._check_positions(position_ids)
        self._check_replay(replay, B, T)
        masks = self._dense_masks(real, position_ids)
        x = self.tok_emb(input_ids) + self.pos_emb(position_ids)  # (B, T, D)
        used: list[Replay] = []
        for i, block in enumerate(self.blocks):
            x, selected = block(x, masks, None if replay is None else replay.layer(i))
            used.append(selected)
        return self.lm_head(self.norm_f(x)), Replay.stack_layers(used)  # (B, T, V)

    def forward_paged(
        self, input_ids: Tensor, positions: Tensor, batch: PagedBatch, cache: PagedCache
    ) -> tuple[Tensor, Replay]:
        """Logits (B, V) of each sequence's last new token, and the new tokens' selections.

        input_ids, positions (N,): the new tokens of all sequences, concatenated.
        cache: from `new_paged_cache`, updated in place. The selections are
        routed_experts (N, L, k) and indexer_topk (N, L, K), None when off.
        """
        self._check_positions(positions)
        x = self.tok_emb(input_ids) + self.pos_emb(positions)  # (N, D)
        used: list[Replay] = []
        for i, block in enumerate(cast(list[Block], self.blocks)):
            index_keys = None if cache.index_keys is None else cache.index_keys[i]
            x, selected = block.forward_paged(x, batch, cache.kv[i], index_keys)
            used.append(selected)
        x = x[batch.last_index]  # (B, D): only the last token of each sequence samples
        return self.lm_head(self.norm_f(x)), Replay.stack_layers(used)  # (B, V)

    def kv_cache_shape(self, num_slots: int) -> tuple[int, ...]:
        """Layout of a paged KV cache holding `num_slots` tokens: (layers, K|V, slots, nh, hs)."""
        return (self.cfg.n_layers, 2, num_slots, self.cfg.n_heads, self.cfg.head_dim)

    def index_cache_shape(self, num_slots: int) -> tuple[int, ...] | None:
        """Layout of the DSA index-key cache: (layers, slots, d_I); None without DSA."""
        if not self.cfg.has_dsa:
            return None
        return (self.cfg.n_layers, num_slots, self.cfg.dsa_index_dim)

    def new_paged_cache(self, num_slots: int, dtype: torch.dtype,
                        device: torch.device | None = None) -> PagedCache:
        # Zeros, not empty: masked context slots are multiplied by 0 and must not be NaN.
        index_shape = self.index_cache_shape(num_slots)
        return PagedCache(
            kv=torch.zeros(self.kv_cache_shape(num_slots), dtype=dtype, device=device),
            index_keys=None if index_shape is None else torch.zeros(index_shape, dtype=dtype,
                                                                    device=device),
        )

    def _dense_masks(self, real: Tensor, positions: Tensor) -> DenseMasks:
        T = real.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=real.device).tril()
        eye = torch.eye(T, dtype=torch.bool, device=real.device)
        visible = causal[None] & real[:, None, :]  # (B, T, T): query i sees key j
        # A pad query sees itself, so its softmax row is never all -inf (NaN); its output is unused.
        masks = DenseMasks(attn_mask=(visible | eye)[:, None], positions=positions)
        if self.cfg.has_dsa:
            masks.visible = visible
            masks.pad_self = eye & ~real[:, :, None]  # (B, T, T)
        return masks

    def _check_positions(self, positions: Tensor) -> None:
        if positions.numel() and int(positions.max()) >= self.cfg.max_seq_len:
            raise ValueError(
                f"position {int(positions.max())} is beyond max_seq_len={self.cfg.max_seq_len}; "
                "shorten the sequence or raise ModelConfig.max_seq_len"
            )

    def _check_replay(self, replay: Replay | None, B: int, T: int) -> None:
        if replay is None:
            return
        cfg = self.cfg
        for name, tensor, k, on in (
            ("routed_experts", replay.routed_experts, cfg.moe_top_k, cfg.has_moe),
            ("indexer_topk", replay.indexer_topk, cfg.dsa_index_topk, cfg.has_dsa),
        ):
            if tensor is None:
                continue
            expected = (B, T, cfg.n_layers, k)
            if not on or tuple(tensor.shape) != expected:
                raise ValueError(
                    f"replay.{name} has shape {tuple(tensor.shape)}, the model expects "
                    f"{expected if on else 'none (the option is off)'}; build it with "
                    "replay.collate_replay from the rollout's rows"
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
