"""Adam (decoupled weight decay), in a dozen lines.

Why not `torch.optim.AdamW`: constructing any torch optimiser imports
`torch._dynamo`, which costs seconds of CPU in every process that does it
(measured: 4.4 s on one core). The demo's whole budget is about a minute on
two cores shared by three processes, so each rank and the warm-up use this
instead. Same update rule as torch's AdamW (non-amsgrad, non-fused).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


class AdamW:
    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.m = [torch.zeros_like(p) for p in self.params]  # first moment
        self.v = [torch.zeros_like(p) for p in self.params]  # second moment
        self.t = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        step_size = self.lr / (1 - b1**self.t)
        bias2_sqrt = math.sqrt(1 - b2**self.t)
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            if p.grad is None:
                continue
            if self.weight_decay:
                p.mul_(1 - self.lr * self.weight_decay)
            m.lerp_(p.grad, 1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            p.addcdiv_(m, v.sqrt().div_(bias2_sqrt).add_(self.eps), value=-step_size)
