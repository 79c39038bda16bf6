"""The loss, against figures computed independently of `train/loss.py`.

- log-probs: the engine's behaviour log-probs (sampled at temperature 0.7)
  and a plain per-row forward of the unpadded sequence agree with
  `response_log_probs` on every trained token (catches a shifted slice and
  a forgotten temperature);
- the clipped surrogate by hand, inside and outside the clip range, for
  positive and negative advantages (catches a flipped sign, an inverted
  ratio, dropped clipping), and its gradient where the clip is active;
- verl's k3 KL by hand; old log-probs replace the rollout's in the ratio;
- the update plan of PPO epochs x mini-batches and its denominators.
"""

from __future__ import annotations

import math

import pytest
import torch

from flowmap.trainer.advantage import grpo_advantages
from flowmap.trainer.batcher import collate
from flowmap.trainer.engine import EngineConfig, LLMEngine, SamplingParams
from flowmap.trainer.model import ModelConfig, TinyLM, build_model
from flowmap.trainer.ref import RefPolicy
from flowmap.trainer.train.loss import LossSettings, k3_kl, ppo_loss, response_log_probs
from flowmap.trainer.train.split import MicroBatch, split_batch
from flowmap.trainer.train.updates import update_plan
from flowmap.trainer.tree import LeafTrajectory

CFG = ModelConfig(vocab_size=24, max_seq_len=48, d_model=32, n_layers=2, n_heads=4, d_ff=64)
PAD = 0
T = 0.7


@pytest.fixture(scope="module")
def model() -> TinyLM:
    return build_model(CFG, seed=3).eval()


@pytest.fixture(scope="module")
def sampled(model: TinyLM) -> list[LeafTrajectory]:
    """Leaves sampled by the engine at T = 0.7: prompts of 2-6 tokens, 3-8 output tokens."""
    g = torch.Generator().manual_seed(11)
    engine = LLMEngine(model, EngineConfig(num_kv_blocks=64, block_size=4))
    leaves = []
    for i in range(6):
        prompt = torch.randint(1, CFG.vocab_size, (2 + i % 5,), generator=g).tolist()
        params = SamplingParams(temperature=T, max_tokens=3 + i, seed=i)
        out = engine.generate([prompt], params)[0]
        r = len(out.output_token_ids)
        leaves.append(LeafTrajectory(f"l{i}", f"l{i}", f"u{i % 2}", prompt, out.output_token_ids,
                                     [1] * r, out.logprobs, [out.output_token_ids], ["0"], [0]))
    return leaves


def _micro_batch(leaves: list[LeafTrajectory], advantages: list[float]) -> MicroBatch:
    batch = collate(leaves, PAD)
    adv = torch.tensor(advantages)[:, None] * batch.response_mask
    return MicroBatch(batch.input_ids, batch.attention_mask, batch.position_ids,
                      batch.response_mask, batch.rollout_log_probs, adv)


def test_log_probs_match_the_engine_under_the_sampling_temperature(
    model: TinyLM, sampled: list[LeafTrajectory]
) -> None:
    mb = _micro_batch(sampled, [0.0] * len(sampled))
    mask = mb.response_mask.bool()
    with torch.no_grad():
        tempered, _ = response_log_probs(model, mb, temperature=T)
        plain, _ = response_log_probs(model, mb)
    assert torch.allclose(tempered[mask], mb.rollout_log_probs[mask], atol=1e-5)
    # untempered, the same tokens are off by far more than the tolerance: the test can tell
    assert (plain[mask] - mb.rollout_log_probs[mask]).abs().mean() > 100 * 1e-5


def test_log_probs_are_the_next_token_predictions_of_each_row(
    model: TinyLM, sampled: list[LeafTrajectory]
) -> None:
    mb = _micro_batch(sampled, [0.0] * len(sampled))
    with torch.no_grad():
        got, _ = response_log_probs(model, mb)
        for i, leaf in enumerate(sampled):  # each row alone, unpadded, position by position
            ids = leaf.prompt_token_ids + leaf.response_token_ids
            log_p = torch.log_softmax(model(torch.tensor([ids]))[0], dim=-1)  # (L, V)
            p = len(leaf.prompt_token_ids)
            for t, token in enumerate(leaf.response_token_ids):
                assert math.isclose(float(got[i, t]), float(log_p[p + t - 1, token]),
                                    abs_tol=1e-5), (i, t)


def _by_hand(mb: MicroBatch, log_p: torch.Tensor, old: torch.Tensor, clip: float) -> float:
    ratio = torch.exp(log_p - old)
    per_token = torch.maximum(-mb.advantages * ratio, -mb.advantages * ratio.clamp(1 - clip,
                                                                                  1 + clip))
    return float((per_token * mb.response_mask).sum()) / float(mb.response_mask.sum())


@pytest.mark.parametrize("delta", [0.1, -0.1, 0.5, -0.5])
def test_clipped_surrogate_by_hand(
    model: TinyLM, sampled: list[LeafTrajectory], delta: float
) -> None:
    """ratio = exp(delta) on every token; rows with A = +1.5, -0.5, +1, -2, +0.25, -1."""
    mb = _micro_batch(sampled, [1.5, -0.5, 1.0, -2.0, 0.25, -1.0])
    with torch.no_grad():
        log_p, _ = response_log_probs(model, mb)
    mb.rollout_log_probs = log_p - delta
    n = int(mb.response_mask.sum())
    parts = ppo_loss(model, mb, n, LossSettings(clip_eps=0.2))
    ratio = math.exp(delta)
    clipped_ratio = min(max(ratio, 0.8), 1.2)
    expected = 0.0
    for row, a in enumerate([1.5, -0.5, 1.0, -2.0, 0.25, -1.0]):
        tokens = float(mb.response_mask[row].sum())
        expected += tokens * max(-a * ratio, -a * clipped_ratio)
    assert float(parts.loss.detach()) == pytest.approx(expected / n, rel=1e-4)
    assert float(parts.loss.detach()) == pytest.approx(_by_hand(mb, log_p, mb.rollout_log_probs, 0.2),
                                              rel=1e-4)
    assert float(parts.ratio_sum) / n == pytest.approx(ratio, rel=1e-4)


def test_clipped_tokens_carry_no_gradient(model: TinyLM, sampled: list[LeafTrajectory]) -> None:
    """A > 0 with ratio 1.65 > 1 + eps: the pessimistic bound is the flat clipped term."""
    mb = _micro_batch(sampled, [1.0] * len(sampled))
    with torch.no_grad():
        log_p, _ = response_log_probs(model, mb)
    mb.rollout_log_probs = log_p - 0.5
    model.zero_grad()
    parts = ppo_loss(model, mb, int(mb.response_mask.sum()), LossSettings(clip_eps=0.2))
    parts.loss.backward()
    assert float(parts.loss.detach()) == pytest.approx(-1.2, rel=1e-5)
    assert all(p.grad is None or float(p.grad.abs().max()) == 0.0 for p in model.parameters())
    assert float(parts.clipped_sum) == float(mb.response_mask.sum())
    # inside the clip range the same batch does move the weights, uphill for A > 0
    mb.rollout_log_probs = log_p.clone()
    model.zero_grad()
    ppo_loss(model, mb, int(mb.response_mask.sum()), LossSettings(clip_eps=0.2)).loss.backward()
    assert max(float(p.grad.abs().max()) for p in model.parameters() if p.grad is not None) > 0
    model.zero_grad()


@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_a_step_on_the_loss_moves_the_log_prob_with_the_advantage(
    sampled: list[LeafTrajectory], advantage: float
) -> None:
    policy = build_model(CFG, seed=3)
    mb = _micro_batch(sampled[:1], [advantage])
    with torch.no_grad():
        before, _ = response_log_probs(policy, mb)
    mb.rollout_log_probs = before.clone()
    ppo_loss(policy, mb, int(mb.response_mask.sum()), LossSettings(clip_eps=0.2)).loss.backward()
    with torch.no_grad():
        for p in policy.parameters():
            if p.grad is not None:
                p -= 0.01 * p.grad
        after, _ = response_log_probs(policy, mb)
    gain = float(((after - before) * mb.response_mask).sum())
    assert gain * advantage > 0


def test_k3_kl_by_hand(model: TinyLM, sampled: list[LeafTrajectory]) -> None:
    assert float(k3_kl(torch.tensor([-1.0]), torch.tensor([-0.7]))) == pytest.approx(
        math.exp(0.3) - 0.3 - 1, rel=1e-6)
    assert float(k3_kl(torch.tensor([-1.0]), torch.tensor([-1.0]))) == 0.0
    mb = _micro_batch(sampled, [0.0] * len(sampled))  # no advantage: the loss is the KL term
    with torch.no_grad():
        log_p, _ = response_log_probs(model, mb)
    mb.rollout_log_probs = log_p.clone()
    n = int(mb.response_mask.sum())
    settings = LossSettings(clip_eps=0.2, kl_coef=0.1)
    parts = ppo_loss(model, mb, n, settings, ref_log_probs=log_p - 0.3)
    assert float(parts.loss.detach()) == pytest.approx(0.1 * (math.exp(-0.3) + 0.3 - 1), rel=1e-4)
    assert float(parts.kl_sum) / n == pytest.approx(math.exp(-0.3) + 0.3 - 1, rel=1e-4)
    same = ppo_loss(model, mb, n, settings, ref_log_probs=log_p)
    assert float(same.loss.detach()) == pytest.approx(0.0, abs=1e-7)


def test_old_log_probs_replace_the_rollout_ones_in_the_ratio(
    model: TinyLM, sampled: list[LeafTrajectory]
) -> None:
    mb = _micro_batch(sampled, [1.0] * len(sampled))
    with torch.no_grad():
        log_p, _ = response_log_probs(model, mb)
    mb.rollout_log_probs = log_p - 1.0  # the rollout's: ratio e, clipped everywhere
    n = int(mb.response_mask.sum())
    parts = ppo_loss(model, mb, n, LossSettings(clip_eps=0.2), old_log_probs=log_p)
    assert float(parts.ratio_sum) / n == pytest.approx(1.0, abs=1e-5)
    assert float(parts.clipped_sum) == 0.0
    assert float(parts.loss.detach()) == pytest.approx(-1.0, rel=1e-5)


def test_update_plan_is_epochs_times_mini_batches_with_their_own_denominators() -> None:
    plan = update_plan(4, epochs=2, mini_batch_tokens=[10, 6], global_tokens=16)
    assert [(u.indices, u.tokens) for u in plan] == [
        ([0, 1], 10), ([2, 3], 6), ([0, 1], 10), ([2, 3], 6)]
    assert [(u.indices, u.tokens) for u in update_plan(2, 1, [16], 16)] == [([0, 1], 16)]


def test_mini_batch_token_counts_add_up_to_the_batch(sampled: list[LeafTrajectory]) -> None:
    batch = collate(sampled, PAD)
    adv = grpo_advantages(batch.response_mask, batch.response_mask, batch.uid)
    shards = split_batch(batch, adv, dp=2, micro_batches=2, mini_batches=2,
                         per_row={"ref_log_probs": batch.rollout_log_probs})
    assert sum(shards.mini_batch_tokens) == shards.global_response_tokens
    assert shards.mini_batch_tokens[0] == sum(int(mbs[0].response_mask.sum())
                                              for mbs in shards.micro_batches)
    for rank, mbs in enumerate(shards.micro_batches):  # the extras are cut like the responses
        for m, mb in enumerate(mbs):
            ref = shards.extras[rank][m]["ref_log_probs"]
            assert ref.shape == mb.rollout_log_probs.shape
            assert torch.equal(ref, mb.rollout_log_probs)


def test_reference_log_probs_equal_the_actors_at_the_same_weights(
    model: TinyLM, sampled: list[LeafTrajectory]
) -> None:
    """The ref reads the whole padded batch, the actor trimmed micro-batches: same numbers,
    so the KL starts at 0 and the rows reach the ranks aligned with their responses."""
    batch = collate(sampled, PAD)
    ref = RefPolicy(model, T).log_probs(batch, batch.leaf_ids, step=0)  # (B, R)
    shards = split_batch(batch, torch.zeros_like(batch.response_mask), dp=1, micro_batches=2,
                         per_row={"ref_log_probs": ref})
    for mb, extras in zip(shards.micro_batches[0], shards.extras[0], strict=True):
        with torch.no_grad():
            actor, _ = response_log_probs(model, mb, temperature=T)
        mask = mb.response_mask.bool()
        assert torch.allclose(extras["ref_log_probs"][mask], actor[mask], atol=1e-5)
        assert torch.allclose(actor[mask], mb.rollout_log_probs[mask], atol=1e-5)
