"""Steps 6 and 7: response log-probs by slicing `[:, -R-1:-1]`, and a split-invariant PPO loss.

Step 6. The logits at position t predict token t+1, so the R response tokens
(the last R columns) are predicted by the R columns just before them:
`logits[:, -R-1:-1]`.

Step 7. The loss is a token mean over the *global* batch: every micro-batch
of every rank divides its sum by the same count of response tokens in the
whole batch, and the ranks all-reduce gradients as sums. The sum of the parts
is then the loss of the whole, so the result does not depend on how the batch
was split (a per-micro-batch mean would weight short micro-batches up).

The objective is PPO's clipped surrogate, with the importance ratio taken
against the rollout (behaviour) log-probs: samples up to `max_staleness`
versions old are corrected for, and pushed no further than the clip allows.
When a batch feeds more than one update (PPO epochs, mini-batches) the ratio
is taken against the old log-probs the actor recomputed before the first one
(verl's `compute_log_prob`), so each update is clipped around the same policy.

Log-probs are those of the *sampling* distribution, `log_softmax(logits / T)`
with the rollout temperature T, as the engine records them (verl divides the
logits by the temperature in the actor too): at T != 1 the untempered
log-probs would bias every ratio.

With a reference model (`train.kl_coef > 0`) the loss adds verl's k3
("low_var_kl") estimate of KL(policy || ref) per token, clamped to [-10, 10],
token-mean over the same global count, times `kl_coef`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from flowmap.trainer.replay import Replay
from flowmap.trainer.train.split import MicroBatch


@dataclass(slots=True)
class LossParts:
    loss: Tensor  # scalar with grad: this micro-batch's share of the global token-mean loss
    entropy_sum: Tensor  # sums over trained tokens (no grad), divided by the global count later
    clipped_sum: Tensor
    ratio_sum: Tensor
    kl_sum: Tensor  # k3 KL to the reference over trained tokens (0 without one)


@dataclass(slots=True)
class LossSettings:
    """What the loss needs from the configuration."""

    clip_eps: float
    temperature: float = 1.0  # the rollout's sampling temperature
    kl_coef: float = 0.0


def k3_kl(log_p: Tensor, ref_log_p: Tensor) -> Tensor:
    """verl's `kl_penalty(..., "low_var_kl")`: exp(ref - logp) - (ref - logp) - 1, clamped."""
    kl = ref_log_p - log_p
    return (torch.exp(kl) - kl - 1).clamp(min=-10.0, max=10.0)


def response_log_probs(
    model: nn.Module, mb: MicroBatch, replay: Replay | None = None, temperature: float = 1.0
) -> tuple[Tensor, Tensor]:
    """(b, R) log-prob of each response token under `model` at `temperature`, and (b, R) entropy.

    replay: rollout's MoE/DSA selections aligned with `mb.input_ids` ((b, T, L, k)),
    used instead of the model's own (R3); None for a dense model.
    """
    R = mb.response_length
    if replay is None:
        logits = model(mb.input_ids, mb.attention_mask, mb.position_ids)  # (b, T, V)
    else:
        logits = model(mb.input_ids, mb.attention_mask, mb.position_ids, replay=replay)
    logits = logits[:, -R - 1 : -1] / temperature  # (b, R, V): step 6, sampling distribution
    log_p = F.log_softmax(logits, dim=-1)  # (b, R, V)
    responses = mb.input_ids[:, -R:]  # (b, R)
    token_log_p = log_p.gather(-1, responses[..., None]).squeeze(-1)  # (b, R)
    entropy = -(log_p.exp() * log_p).sum(-1)  # (b, R)
    return token_log_p, entropy


def ppo_loss(
    model: nn.Module, mb: MicroBatch, global_response_tokens: int, settings: LossSettings,
    replay: Replay | None = None, *, old_log_probs: Tensor | None = None,
    ref_log_probs: Tensor | None = None,
) -> LossParts:
    """This micro-batch's contribution to the global token-mean clipped PPO loss.

    old_log_probs: (b, R) the actor's own at the start of the step (several updates per
    batch); None: the ratio is against the rollout log-probs. ref_log_probs: (b, R) for
    the KL term (settings.kl_coef > 0).
    """
    log_p, entropy = response_log_probs(model, mb, replay, settings.temperature)
    dtype = log_p.dtype
    mask = mb.response_mask.to(dtype)
    advantages = mb.advantages.to(dtype)
    behaviour = mb.rollout_log_probs if old_log_probs is None else old_log_probs
    ratio = torch.exp(log_p - behaviour.to(dtype))  # (b, R)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - settings.clip_eps, 1.0 + settings.clip_eps)
    per_token = torch.maximum(unclipped, clipped)  # (b, R) pessimistic bound
    kl = torch.zeros_like(log_p)
    if ref_log_probs is not None and settings.kl_coef > 0:
        kl = k3_kl(log_p, ref_log_probs.to(dtype))
        per_token = per_token + settings.kl_coef * kl
    denom = max(global_response_tokens, 1)
    with torch.no_grad():
        was_clipped = (clipped > unclipped).to(dtype)
        return_parts = (
            (entropy * mask).sum(),
            (was_clipped * mask).sum(),
            (ratio * mask).sum(),
            (kl * mask).sum(),
        )
    return LossParts((per_token * mask).sum() / denom, *return_parts)
