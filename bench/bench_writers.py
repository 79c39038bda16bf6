"""What the evidence of who wrote a storage costs, beside the blocks' reads.

Prints CPU time (`thread_time`, best of 5), each traced and untraced:
- an optimizer's step over a model of 100 parameter tensors: the step's post-hook reads
  each parameter's address and version counter (`optimizer_steps._wrote`);
- `share_memory_` of a fresh 64 KiB tensor: two address reads around torch's move, and
  the table told of it (`flowmap/integrations/shared_moves.py`);
- a hop of 10 tensors before any storage moved, and after (`MovedStorages.keys`: a
  storage read per tensor);
- a hop of a dataclass with a float field (the walk enters its instance dict).

Run: python bench/bench_writers.py
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable

import torch

import flowmap


def best(fn: Callable[[], object], n: int) -> float:
    """µs per call, the best of 5 rounds of `n`."""
    out = float("inf")
    for _ in range(5):
        t0 = time.thread_time_ns()
        for _ in range(n):
            fn()
        out = min(out, (time.thread_time_ns() - t0) / n)
    return out / 1000


@dataclasses.dataclass
class Trajectory:
    uid: str
    tokens: torch.Tensor
    reward: float = 0.0


def measure(traced: bool) -> dict[str, float]:
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(50)])  # 100 tensors
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    batch = [torch.zeros(16) for _ in range(10)]
    traj = Trajectory("u-000001", torch.zeros(16), 0.5)
    out: dict[str, float] = {}
    if traced:
        flowmap.hop("trainer", "rollout", dict(model.state_dict()), name="weights")
    out["optimizer step, 100 parameters"] = best(opt.step, 500)
    out["hop of 10 tensors, no storage moved"] = best(
        lambda: flowmap.hop("a", "b", batch, name="batch"), 5000)
    out["share_memory_ of a fresh 64 KiB tensor"] = best(
        lambda: torch.empty(16384).share_memory_(), 200)
    out["hop of 10 tensors, storages moved before"] = best(
        lambda: flowmap.hop("a", "b", batch, name="batch"), 5000)
    out["hop of a dataclass with a float"] = best(
        lambda: flowmap.hop("a", "b", traj, name="traj"), 5000)
    return out


def main() -> int:
    plain = measure(False)
    with tempfile.TemporaryDirectory() as tmp, flowmap.tracing(tmp + "/run"):
        traced = measure(True)
    for name, us in traced.items():
        print(f"{name}: {us:.2f} µs traced, {plain[name]:.2f} µs untraced")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
