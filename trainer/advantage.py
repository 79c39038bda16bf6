"""GRPO advantages: token dimension -> scalar -> normalised within the group -> token dimension.

    s_i  = sum_t token_level_rewards[i, t]
    ŝ_i  = (s_i - mean_{uid(j) = uid(i)} s_j) / (std_{uid(j) = uid(i)} s_j + eps)
    A_it = ŝ_i * response_mask[i, t]

As in verl's `compute_grpo_outcome_advantage`: the std is the unbiased one,
and a group of one has mean 0 and std 1 (its score passes through). Leaves of a
forked trajectory share its `uid`, so they are compared with every other leaf
of the row.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(slots=True)
class AdvantageOutput:
    """advantage -> batcher."""

    advantages: Tensor  # (B, R) float32, zero off the trained tokens


def grpo_advantages(
    token_level_rewards: Tensor, response_mask: Tensor, uid: list[str], eps: float = 1e-6
) -> Tensor:
    """(B, R) advantages from (B, R) rewards, (B, R) mask and the (B,) group ids."""
    scores = token_level_rewards.sum(-1)  # (B,)
    rows: dict[str, list[int]] = defaultdict(list)
    for i, u in enumerate(uid):
        rows[u].append(i)
    normalised = torch.zeros_like(scores)
    for members in rows.values():
        idx = torch.tensor(members)
        group = scores[idx]
        if len(members) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = group.mean(), group.std()
        normalised[idx] = (group - mean) / (std + eps)
    return normalised[:, None] * response_mask  # tile back to tokens, then mask
