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


def response_log_probs(
    model: nn.Module, mb: MicroBatch, replay: Replay | None = None
) -> tuple[Tensor, Tensor]:
    """(b, R) log-prob of each response token under `model`, and (b, R) entropy.

    replay: rollout's MoE/DSA selections aligned with `mb.input_ids` ((b, T, L, k)),
    used instead of the model's own (R3); None for a dense model.
    """
    R = mb.response_length
    if replay is None:
        logits = model(mb.input_ids, mb.attention_mask, mb.position_ids)  # (b, T, V)
    else:
        logits = model(mb.input_ids, mb.attention_mask, mb.position_ids, replay=replay)
    logits = logits[:, -R - 1 : -1]  # (b, R, V): step 6
    log_p = F.log_softmax(logits, dim=-1)  # (b, R, V)
    responses = mb.input_ids[:, -R:]  # (b, R)
    token_log_p = log_p.gather(-1, responses[..., None]).squeeze(-1)  # (b, R)
    entropy = -(log_p.exp() * log_p).sum(-1)  # (b, R)
    return token_log_p, entropy


def ppo_loss(
    model: nn.Module, mb: MicroBatch, global_response_tokens: int, clip_eps: float,
    replay: Replay | None = None,
) -> LossParts:
    """This micro-batch's contribution to the global token-mean clipped PPO loss."""
    log_p, entropy = response_log_probs(model, mb, replay)
    dtype = log_p.dtype
    mask = mb.response_mask.to(dtype)
    advantages = mb.advantages.to(dtype)
    ratio = torch.exp(log_p - mb.rollout_log_probs.to(dtype))  # (b, R)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps)
    per_token = torch.maximum(unclipped, clipped)  # (b, R) pessimistic bound
    denom = max(global_response_tokens, 1)
    with torch.no_grad():
        was_clipped = (clipped > unclipped).to(dtype)
        return_parts = (
            (entropy * mask).sum(),
            (was_clipped * mask).sum(),
            (ratio * mask).sum(),
        )
    return LossParts((per_token * mask).sum() / denom, *return_parts)
