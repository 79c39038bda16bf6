"""Wall-time overhead of tracing on a small torch train loop: traced / untraced.

Both variants run in one process, interleaved (ABAB...), so machine noise hits
both alike; the figure is the ratio of the medians. The loop is a miniature of
an RL step — a batch handed to the trainer, a forward/backward, log-probs and
the loss handed back, a counter — with 6 hops per step.

Run: python bench/bench_overhead.py [--steps 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

import flowmap


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(64, 64), torch.nn.Linear(64, 256),
                               torch.nn.GELU(), torch.nn.Linear(256, 64))


def train(model: torch.nn.Module, steps: int) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(steps):
        flowmap.step(step)
        tokens = torch.randint(0, 64, (16, 32))
        mask = torch.ones(16, 32)
        batch = {"input_ids": tokens, "attention_mask": mask, "advantages": torch.randn(16, 32)}
        flowmap.hop("driver", "batcher", batch, name="trajectories", items=list(range(16)))
        flowmap.hop("batcher", "trainer/rank0", batch, name="micro_batch", transport="shm")
        logits = model(tokens)  # (B, T, V)
        logp = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        loss = -(logp * batch["advantages"] * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        flowmap.hop("trainer/rank0", "driver", {"log_probs": logp.detach(), "loss": loss.detach()},
                    name="metrics")
        flowmap.counter("loss", loss.item())
        flowmap.hop("trainer/rank0", "weight_sync", dict(model.state_dict()), name="weights")
        flowmap.hop("weight_sync", "rollout/0", dict(model.state_dict()), name="weights")
        flowmap.hop("driver", "rollout/0", {"prompt": tokens[:, :8]}, name="request")
    return loss.item()


def timed(traced: bool, steps: int, tmp: str, i: int) -> float:
    model = make_model()
    t0 = time.perf_counter()
    if traced:
        with flowmap.tracing(f"{tmp}/run{i}"):
            train(model, steps)
    else:
        train(model, steps)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    plain: list[float] = []
    traced: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        timed(False, 20, tmp, -1)  # warm-up
        for i in range(args.rounds):
            plain.append(timed(False, args.steps, tmp, i))
            traced.append(timed(True, args.steps, tmp, i))
    a, b = statistics.median(plain), statistics.median(traced)
    print(f"untraced median {a:.3f} s, traced median {b:.3f} s over {args.steps} steps "
          f"x {args.rounds} rounds: overhead {b / a:.3f}x (target <= 1.03x)")


if __name__ == "__main__":
    main()
