"""Step 7: the loss and its gradients do not depend on how the batch is split.

GIVEN one batch of leaf trajectories of varied lengths (some rows padded, some
tokens masked, ratios on both sides of the clip)
WHEN real gloo rank processes compute the loss and all-reduced gradients as
(dp=1, one micro-batch) and as (dp=2, two micro-batches each: four in all)
THEN both agree to 1e-6 (float64), because every part divides by the global
count of response tokens and gradients are summed across ranks.
"""

from __future__ import annotations

import random
import time

import torch

from flowmap.trainer.batcher import collate
from flowmap.trainer.config import build
from flowmap.trainer.model import ModelConfig, build_model
from flowmap.trainer.train.group import StepResult, TrainerGroup
from flowmap.trainer.train.split import split_batch
from flowmap.trainer.tree import LeafTrajectory

VOCAB = 18


def _leaves(num: int, seed: int) -> list[LeafTrajectory]:
    rng = random.Random(seed)
    leaves = []
    for i in range(num):
        p, r = rng.randint(3, 6), rng.randint(2, 12)
        mask = [int(rng.random() < 0.7) for _ in range(r)]
        leaves.append(
            LeafTrajectory(
                leaf_id=f"l{i}", traj_id=f"t{i}", uid=f"u{i // 3}",
                prompt_token_ids=[1] + [rng.randrange(3, VOCAB) for _ in range(p - 1)],
                response_token_ids=[rng.randrange(3, VOCAB) for _ in range(r)],
                response_mask=mask,
                rollout_log_probs=[-rng.uniform(2.0, 3.8) if m else 0.0 for m in mask],
                turn_outputs=[], expected=[], weight_versions=[], version_tag=0,
            )
        )
    return leaves


def _probe(dp: int, micro_batches: int) -> tuple[float, torch.Tensor]:
    cfg = build({"train.dp": dp, "train.micro_batches": micro_batches, "train.dtype": "float64"})
    model_cfg = ModelConfig(vocab_size=VOCAB, max_seq_len=32)
    model = build_model(model_cfg, cfg.seed)
    batch = collate(_leaves(11, seed=3), pad_id=0)  # 11 rows: padding needed for 2 x 2
    advantages = torch.randn(batch.batch_size, generator=torch.Generator().manual_seed(0))
    advantages = advantages[:, None] * batch.response_mask
    with TrainerGroup(cfg, model) as group:
        group.load_initial_weights(model)
        group.submit(0, split_batch(batch, advantages, dp, micro_batches), probe=True)
        results: list[StepResult] = []
        deadline = time.monotonic() + 120
        while not results and time.monotonic() < deadline:
            results = group.poll(timeout=1.0)
        assert results, "the ranks did not answer"
        grads = group.weights(results[0])["grads"].clone()
    return results[0].metrics["loss"], grads


def test_loss_and_grads_do_not_depend_on_the_split() -> None:
    loss_1, grads_1 = _probe(dp=1, micro_batches=1)
    loss_2, grads_2 = _probe(dp=2, micro_batches=2)
    assert grads_1.dtype == torch.float64
    assert abs(loss_1 - loss_2) <= 1e-6
    assert float((grads_1 - grads_2).abs().max()) <= 1e-6
    assert float(grads_1.abs().max()) > 1e-4  # the comparison is not between zeros
