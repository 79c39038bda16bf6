"""One rank's updates of a training step: PPO epochs x mini-batches, old log-probs, reference.

With the defaults a step is one update over the whole batch, and the ratio
is against the rollout log-probs. With `train.ppo_epochs` or
`train.mini_batches` above 1 the batch feeds several optimiser steps, so the
actor first recomputes the log-probs of every response token under its
weights at the start of the step (`old_log_probs`, verl's
`compute_log_prob`): each update's ratio is then clipped around that same
policy, not around the rollout's (which differs by up to `max_staleness`
versions and the sampling numerics). Each update's loss is the token mean
over its mini-batch's global count of response tokens, so it still does not
depend on how the mini-batch was split across ranks and micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import Tensor, nn

from flowmap.trainer.replay import Replay
from flowmap.trainer.train.loss import LossParts, LossSettings, ppo_loss, response_log_probs
from flowmap.trainer.train.optim import AdamW
from flowmap.trainer.train.split import MicroBatch


@dataclass(slots=True)
class Update:
    """One optimiser step: which of the rank's micro-batches, and the global token count."""

    indices: list[int]
    tokens: int


def update_plan(num_micro_batches: int, epochs: int, mini_batch_tokens: list[int],
                global_tokens: int) -> list[Update]:
    """Epoch-major list of updates; one update over everything when there is one mini-batch."""
    minis = max(len(mini_batch_tokens), 1)
    per = num_micro_batches // minis
    if minis == 1:
        one = [Update(list(range(num_micro_batches)), global_tokens)]
    else:
        one = [Update(list(range(k * per, (k + 1) * per)), mini_batch_tokens[k])
               for k in range(minis)]
    return [Update(list(u.indices), u.tokens) for _ in range(epochs) for u in one]


@torch.no_grad()
def old_log_probs(model: nn.Module, mbs: list[MicroBatch], replays: list[Replay | None],
                  temperature: float) -> list[Tensor]:
    """(b, R) per micro-batch: the actor's own log-probs before any update of this step."""
    return [response_log_probs(model, mb, replay, temperature)[0]
            for mb, replay in zip(mbs, replays, strict=True)]


@dataclass
class MicroLosses:
    """The loss of micro-batch i with everything it is compared against; sums the KL."""

    model: nn.Module
    mbs: list[MicroBatch]
    replays: list[Replay | None]
    settings: LossSettings
    olds: list[Tensor] | None = None
    refs: list[Tensor | None] = field(default_factory=list)
    kl_sum: Tensor = field(default_factory=lambda: torch.zeros(1, dtype=torch.float64))

    def of(self, i: int, tokens: int) -> LossParts:
        parts = ppo_loss(self.model, self.mbs[i], tokens, self.settings, self.replays[i],
                         old_log_probs=None if self.olds is None else self.olds[i],
                         ref_log_probs=self.refs[i] if self.refs else None)
        self.kl_sum += parts.kl_sum.double()
        return parts

    def kl_mean(self, tokens: int, dp: int) -> float:
        """The last update's mean k3 KL over its trained tokens (summed over ranks)."""
        if self.settings.kl_coef <= 0:
            return 0.0  # no reference model: no collective either
        total = self.kl_sum.clone()
        if dp > 1:
            dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return float(total) / max(tokens, 1)


def sum_over_ranks(t: Tensor, how: str = "c10d") -> Tensor:
    """`t` summed over the data-parallel ranks, in place (`c10d`) or through torch's
    functional collectives (`functional`: issued from C++, as compiled code does)."""
    if how == "functional":
        from torch.distributed import _functional_collectives as fc

        world = dist.group.WORLD
        assert world is not None  # dp > 1: the group exists
        return fc.wait_tensor(fc.all_reduce(t, "sum", world))
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def earlier_update(losses: MicroLosses, update: Update, optimizer: AdamW, dp: int,
                   grad_clip: float, how: str = "c10d") -> None:
    """An optimiser step before the step's last (whose metrics the rank reports)."""
    optimizer.zero_grad()
    params = list(losses.model.parameters())
    for i in update.indices:
        losses.of(i, update.tokens).loss.backward()
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    if dp > 1:
        flat = sum_over_ranks(flat, how)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).clone()
        offset += n
    torch.nn.utils.clip_grad_norm_(params, grad_clip)
    optimizer.step()
    losses.kl_sum.zero_()
