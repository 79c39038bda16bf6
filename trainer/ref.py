"""The reference policy (owner `ref`): frozen warmed-up weights, log-probs for the KL term.

With `train.kl_coef > 0` the loss keeps the policy near where RL started
(verl's `use_kl_loss` with `kl_loss_type="low_var_kl"`). As in verl, the
reference is a separate worker that reads the batch and hands back
`ref_log_probs (B, R)`; here it runs in the driver process, between advantage
and the split, and its output rides to each rank in that rank's shared-memory
slot, cut like the responses (`ref -> trainer/rank<k> : ref_log_probs`).
Its log-probs use the sampling temperature, like the actor's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import flowmap
from flowmap.trainer.batcher import RolloutBatch


@dataclass(slots=True)
class RefInputs:
    """batcher -> ref: what the reference model reads of the batch."""

    input_ids: Tensor  # (B, P + R) int64
    attention_mask: Tensor  # (B, P + R) int64
    position_ids: Tensor  # (B, P + R) int64


class RefPolicy:
    def __init__(self, model: nn.Module, temperature: float,
                 device: torch.device | str = "cpu") -> None:
        # Its own frozen copy: the policy's copy keeps moving, the reference never does.
        self.model = copy.deepcopy(model).eval().requires_grad_(False).to(device)
        self.device = torch.device(device)
        self.temperature = temperature

    @torch.no_grad()
    def log_probs(self, batch: RolloutBatch, items: list[str], step: int) -> Tensor:
        """(B, R) float32 log-prob of every response token under the reference weights."""
        inputs = RefInputs(batch.input_ids, batch.attention_mask, batch.position_ids)
        flowmap.hop("batcher", "ref", inputs, name="ref_inputs", items=items, step=step)
        R = batch.response_length
        dev = self.device
        logits = self.model(inputs.input_ids.to(dev), inputs.attention_mask.to(dev),
                            inputs.position_ids.to(dev))
        log_p = F.log_softmax(logits[:, -R - 1 : -1].float() / self.temperature, dim=-1)
        out = log_p.gather(-1, batch.responses.to(dev)[..., None]).squeeze(-1)  # (B, R)
        return out.cpu()  # it rides to the ranks in their host shared-memory slots
