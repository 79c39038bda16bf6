"""DSA-style sparse attention: a lightning indexer keeps the top-k past positions per query.

DeepSeek-V3.2's DeepSeek Sparse Attention puts a small, cheap scorer in front
of attention. Each token gets one index key k_s; each query gets a few index
heads q_{t,h} with weights w_{t,h}; the score of key s for query t is

    I(t, s) = sum_h w_{t,h} * relu(q_{t,h} . k_s)        (s <= t)

and attention of query t is restricted to the `dsa_index_topk` keys of highest
score. When t has no more than k past positions, all are kept.

The selection is recorded as key *positions* (ascending, -1 padded): positions
mean the same thing in the engine's paged context and in a padded training
batch, which is what lets training replay rollout's `indexer_topk` exactly.
ReLU makes exact ties (all heads at 0) common, so ties go to the earlier
position (a stable sort), the same in every layout. The top-k is a hard choice
and passes no gradient to the indexer; V3.2 trains its indexer with a separate
KL loss towards dense attention, which this toy leaves out.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class LightningIndexer(nn.Module):
    def __init__(
        self, d_model: int, index_dim: int, index_heads: int, topk: int, noise: float = 0.0
    ) -> None:
        super().__init__()
        self.index_dim = index_dim
        self.index_heads = index_heads
        self.topk = topk
        self.noise = noise  # train-mode noise on the scores: a stand-in for train/inference drift
        self.q = nn.Linear(d_model, index_heads * index_dim, bias=False)
        self.k = nn.Linear(d_model, index_dim, bias=False)
        self.w = nn.Linear(d_model, index_heads, bias=False)

    def keys(self, x: Tensor) -> Tensor:
        """x (..., D) -> index keys (..., d_I); the engine caches them per slot, like K/V."""
        return self.k(x)

    def select(
        self,
        x: Tensor,
        keys: Tensor,
        visible: Tensor,
        key_positions: Tensor,
        replay: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Which keys each query keeps.

        x (B, Q, D) the queries' inputs; keys (B, C, d_I); visible (B, Q, C) bool
        (causal, real keys); key_positions (B, C) each key's token position;
        replay (B, Q, k) positions to keep instead, rows of all -1 not recorded.
        Returns keep (B, Q, C) bool and the kept positions (B, Q, k) int32.
        """
        keep, positions = topk_positions(self.scores(x, keys), visible, key_positions, self.topk)
        if replay is None:
            return keep, positions
        recorded = (replay >= 0).any(dim=-1)  # (B, Q): a real query keeps at least one key
        # (B, Q, k, 1) == (B, 1, 1, C) -> (B, Q, C): key c is one of the replayed positions
        replayed = (replay[..., None] == key_positions[:, None, None, :]).any(dim=-2) & visible
        keep = torch.where(recorded[..., None], replayed, keep)
        positions = torch.where(recorded[..., None], replay.to(torch.int32), positions)
        return keep, positions

    def scores(self, x: Tensor, keys: Tensor) -> Tensor:
        """x (B, Q, D), keys (B, C, d_I) -> I(t, s) (B, Q, C)."""
        B, Q, _ = x.shape
        q = self.q(x).view(B, Q, self.index_heads, self.index_dim)  # (B, Q, H, d_I)
        per_head = torch.einsum("bqhd,bcd->bqhc", q, keys).relu()  # (B, Q, H, C)
        scores = torch.einsum("bqhc,bqh->bqc", per_head, self.w(x))  # (B, Q, C)
        if self.training and self.noise:
            scores = scores + self.noise * torch.randn_like(scores)
        return scores


def topk_positions(
    scores: Tensor, visible: Tensor, key_positions: Tensor, k: int
) -> tuple[Tensor, Tensor]:
    """The k visible keys of highest score per query, ties to the earlier key.

    scores, visible (B, Q, C); key_positions (B, C), increasing along C over
    visible keys. Returns keep (B, Q, C) bool and positions (B, Q, k) int32,
    ascending, -1 where fewer than k keys are visible.
    """
    B, Q, C = scores.shape
    masked = scores.masked_fill(~visible, float("-inf"))
    order = masked.sort(dim=-1, descending=True, stable=True).indices[..., :k]  # (B, Q, min(k, C))
    chosen = visible.gather(-1, order)  # (B, Q, min(k, C)): False past the visible keys
    keep = torch.zeros_like(visible).scatter_(-1, order, chosen)
    positions = key_positions[:, None, :].expand(B, Q, C).gather(-1, order)  # (B, Q, min(k, C))
    # Ascending positions, unfilled picks (-1) last: sort with them pushed to the end.
    last = torch.iinfo(positions.dtype).max
    positions = torch.where(chosen, positions, last).sort(dim=-1).values
    positions = positions.masked_fill(positions == last, -1).to(torch.int32)
    if positions.shape[-1] < k:  # fewer keys than k in the whole context
        positions = torch.cat([positions, positions.new_full((B, Q, k - C), -1)], dim=-1)
    return keep, positions
