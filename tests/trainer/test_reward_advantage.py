"""Reward placement and GRPO advantages against hand-computed values."""

from __future__ import annotations

import math

import torch

from flowmap.trainer.advantage import grpo_advantages
from flowmap.trainer.batcher import collate
from flowmap.trainer.reward import compute_rewards, place_at_last_token
from flowmap.trainer.task import CountingTask, make_tokenizer
from flowmap.trainer.tree import LeafTrajectory


def test_reward_sits_at_the_last_valid_token() -> None:
    scores = torch.tensor([0.5, 1.0, 0.0])
    response_attention = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    rewards = place_at_last_token(scores, response_attention)
    assert rewards.tolist() == [[0, 0, 0.5, 0], [0, 0, 0, 1.0], [0, 0, 0, 0]]


def test_rewards_of_real_leaves_use_the_verifier() -> None:
    task = CountingTask(make_tokenizer())
    tok = task.tokenizer

    def leaf(answers: list[str], extra: int) -> LeafTrajectory:
        outs = [tok.encode(a) + [tok.eos_id] for a in answers]
        response = [t for o in outs for t in o] + [tok.encode("y")[0]] * extra
        return LeafTrajectory("l", "t", "u", [tok.bos_id], response, [1] * len(response),
                              [0.0] * len(response), outs, ["4", "8"], [0, 0])

    batch = collate([leaf(["4", "8"], 0), leaf(["4", "7"], 1), leaf(["5", "5"], 2)], tok.pad_id)
    out = compute_rewards(batch, task)
    assert out.scores.tolist() == [1.0, 0.5, 0.0]
    # row lengths 4, 5, 6 -> the score sits at index 3, 4, 5
    assert out.token_level_rewards[0, 3] == 1.0 and out.token_level_rewards[1, 4] == 0.5
    assert out.token_level_rewards.sum(-1).tolist() == [1.0, 0.5, 0.0]


def test_grpo_advantages_by_hand() -> None:
    # Group "a": scores 1, 0, 0.5 -> mean 0.5, unbiased std 0.5.
    # Group "b": scores 0.2, 0.2 -> std 0: advantages 0.
    # Group "c": one row -> mean 0, std 1: the score passes through.
    token_level_rewards = torch.tensor([
        [0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.0],
        [0.0, 0.2, 0.0], [0.0, 0.0, 0.2], [0.0, 0.7, 0.0],
    ])
    response_mask = torch.tensor([
        [1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0],
        [0.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 0.0],
    ])
    uid = ["a", "a", "a", "b", "b", "c"]
    eps = 1e-6
    adv = grpo_advantages(token_level_rewards, response_mask, uid, eps=eps)
    a = [(1.0 - 0.5) / (0.5 + eps), (0.0 - 0.5) / (0.5 + eps), 0.0]
    expected = [
        [a[0], a[0], 0.0], [a[1], a[1], a[1]], [a[2], 0.0, 0.0],
        [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.7, 0.7, 0.0],
    ]
    for row, exp in zip(adv.tolist(), expected, strict=True):
        for x, y in zip(row, exp, strict=True):
            assert math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6)
