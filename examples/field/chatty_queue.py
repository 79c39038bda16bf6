"""Weight sync as one queue message per parameter.

The pattern of open-instruct #1535 and TRL #5249 through a
`torch.multiprocessing` queue: the trainer puts `{name: tensor}` for each
parameter of a small transformer (projections, norms, embeddings: unlike
shapes) every step; the rollout worker loads them one by one. flowmap counts
the messages per step and prices each one bucketing would spare.

    flowmap trace examples/field/chatty_queue.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch

import flowmap

LAYERS, HIDDEN, STEPS = 8, 64, 3
PER_LAYER = 6  # q, k, v, o, mlp, norm
PARAMS = LAYERS * PER_LAYER + 1  # and the embedding
# every message but one spared, at 64 KiB a message (docs/findings.md)
EXPECT = {"kind": "chatty", "seam": "trainer -> rollout",
          "bytes_per_step": (PARAMS - 1) * 64 * 1024}


def model() -> dict[str, torch.Tensor]:
    params = {"embed.weight": torch.randn(512, HIDDEN)}
    for i in range(LAYERS):
        for name in ("q", "k", "v", "o"):
            params[f"layers.{i}.attn.{name}.weight"] = torch.randn(HIDDEN, HIDDEN)
        params[f"layers.{i}.mlp.weight"] = torch.randn(4 * HIDDEN, HIDDEN)
        params[f"layers.{i}.norm.weight"] = torch.ones(HIDDEN)
    return params


def rollout(q: mp.Queue, ack: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PARAMS):
            q.get()
        ack.put(step)


def main() -> None:
    ctx = mp.get_context("fork")
    q, ack = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=rollout, args=(q, ack))
    p.start()
    flowmap.set_owner("trainer")
    params = model()
    for step in range(STEPS):
        flowmap.step(step)
        for name, value in params.items():  # the bug: one message per parameter
            q.put({name: value})
        ack.get()
    p.join()


if __name__ == "__main__":
    main()
