"""Reward: one verifiable scalar per leaf trajectory, placed at its last valid token.

The scalar `r_i` (the share of turns answered right) goes into
`token_level_rewards` at index `valid_response_length - 1` and zeros
everywhere else, as verl stores it: credit is assigned where the trajectory
ends, and any per-token shaping (a KL penalty, say) could later be added to the
same tensor without changing the shape of the seam.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from flowmap.trainer.batcher import RolloutBatch
from flowmap.trainer.task import CountingTask
from flowmap.trainer.tree import LeafTrajectory


@dataclass(slots=True)
class RewardOutput:
    """reward -> advantage."""

    token_level_rewards: Tensor  # (B, R) float32: the score at the last valid token, else 0
    scores: Tensor  # (B,) float32: the scalar of each leaf, for the reward_mean metric


def _score(task: CountingTask, outs: list[list[int]], exps: list[str]) -> float:
    return task.score([task.is_correct(out, exp) for out, exp in zip(outs, exps, strict=True)])


def leaf_score(leaf: LeafTrajectory, task: CountingTask) -> float:
    """The verifier's scalar of one leaf (dynamic sampling scores groups before batching)."""
    return _score(task, leaf.turn_outputs, leaf.expected)


def score_leaves(batch: RolloutBatch, task: CountingTask) -> Tensor:
    """(B,) the verifier's scalar of each row, in [0, 1]."""
    scores = [_score(task, outs, exps)
              for outs, exps in zip(batch.turn_outputs, batch.expected, strict=True)]
    return torch.tensor(scores, dtype=torch.float32)


def place_at_last_token(scores: Tensor, response_attention_mask: Tensor) -> Tensor:
    """(B, R) zeros with scores (B,) at each row's last real response token."""
    valid_response_length = response_attention_mask.sum(-1)  # (B,)
    if bool((valid_response_length < 1).any()):
        raise ValueError("a row has no response token to carry its reward")
    rewards = torch.zeros(response_attention_mask.shape, dtype=torch.float32)
    rows = torch.arange(scores.shape[0])
    rewards[rows, valid_response_length - 1] = scores.float()
    return rewards


def compute_rewards(batch: RolloutBatch, task: CountingTask) -> RewardOutput:
    scores = score_leaves(batch, task)
    response_attention_mask = batch.attention_mask[:, -batch.response_length :]  # (B, R)
    return RewardOutput(place_at_last_token(scores, response_attention_mask), scores)


@dataclass(slots=True)
class TruncationMask:
    """reward -> advantage (rollout.mask_truncated): the response mask with truncated leaves out."""

    response_mask: Tensor  # (B, R) float32: the batch's mask, zero on every truncated row
    truncated: Tensor  # (B,) bool: some model turn of the leaf ended without <eos>


def mask_truncated(batch: RolloutBatch, eos_id: int) -> TruncationMask:
    """Leaves with a turn cut off at max_tokens keep no loss (TRL's mask_truncated_completions)."""
    truncated = torch.tensor([any(not out or out[-1] != eos_id for out in outs)
                              for outs in batch.turn_outputs], dtype=torch.bool)
    return TruncationMask(batch.response_mask * (~truncated).float()[:, None], truncated)
