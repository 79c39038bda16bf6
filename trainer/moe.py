"""Mixture-of-experts feed-forward: a router picks the top-k of E small experts per token.

The router scores every expert; the k highest are the token's selection and a
softmax over just those k scores gives the gates that weight their outputs
(Mixtral / DeepSeek style). The selection is a hard choice, so two numerically
slightly different passes over the same token (rollout engine vs trainer) can
pick different experts; R3 records rollout's selection and replays it here
(`routed_experts`), while the gates still come from this router so its
gradients flow.

Each expert is `d_ff // moe_top_k` wide, so a token's active feed-forward width
equals the dense MLP's: the option changes what is computed, not how much.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Expert(nn.Module):
    """One expert: the dense MLP's shape, narrower."""

    def __init__(self, d_model: int, d_hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(d_model, d_hidden)
        self.down = nn.Linear(d_hidden, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.gelu(self.up(x)))


class MoE(nn.Module):
    def __init__(
        self, d_model: int, d_ff: int, num_experts: int, top_k: int, router_noise: float = 0.0
    ) -> None:
        super().__init__()
        self.top_k = top_k
        # Train-mode noise on the router logits: a stand-in for train/inference drift (tests).
        self.router_noise = router_noise
        self.router = nn.Linear(d_model, num_experts, bias=False)
        self.experts = nn.ModuleList(Expert(d_model, d_ff // top_k) for _ in range(num_experts))

    def forward(self, x: Tensor, replay: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x (..., D) -> (output (..., D), experts used (..., k) int32, ascending).

        `replay` (..., k) int32: use these experts instead of the router's top-k;
        rows with a -1 (not recorded) keep the router's own choice.
        """
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # (N, D)
        logits = self.router(flat)  # (N, E)
        if self.training and self.router_noise:
            logits = logits + self.router_noise * torch.randn_like(logits)
        chosen = logits.topk(self.top_k, dim=-1).indices.sort(dim=-1).values  # (N, k)
        if replay is not None:
            replay = replay.reshape(-1, self.top_k).to(chosen.dtype)  # (N, k)
            recorded = (replay >= 0).all(dim=-1, keepdim=True)  # (N, 1)
            chosen = torch.where(recorded, replay, chosen)
        gates = torch.softmax(logits.gather(-1, chosen), dim=-1)  # (N, k)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = (chosen == e).nonzero(as_tuple=True)  # who routed to e, and as which pick
            if token.numel():
                out.index_add_(0, token, expert(flat[token]) * gates[token, slot, None])
        return out.view(shape), chosen.to(torch.int32).view(*shape[:-1], self.top_k)
