"""Weight sync as one message per parameter.

Reported in allenai/open-instruct #1535 (~200 Ray calls per sync, over 120 s
where the NCCL transfer itself took 0.5 s) and huggingface/trl #5249. Each step
the trainer sends the rollout process every parameter of a small model through
its own pipe message; flowmap counts the messages per step on the seam and
says to bucket them.

    flowmap trace examples/field/chatty.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch

import flowmap

NUM_PARAMS, PARAM_ELEMENTS, STEPS = 48, 256, 3  # float32: 1 KiB per parameter
EXPECT = {"kind": "chatty", "seam": "trainer -> rollout",
          "bytes_per_step": (NUM_PARAMS - 1) * 64 * 1024}


def rollout(conn: mp.connection.Connection) -> None:
    flowmap.set_owner("rollout")
    for _ in range(STEPS * NUM_PARAMS):
        conn.recv()


def main() -> None:
    ctx = mp.get_context("fork")
    here, there = ctx.Pipe()
    p = ctx.Process(target=rollout, args=(there,))
    p.start()
    flowmap.set_owner("trainer")
    # a model's parameters are not all alike: weights and biases, 1 KiB each
    params = {f"layer{i // 2}.{'weight' if i % 2 == 0 else 'bias'}":
              torch.randn(16, PARAM_ELEMENTS // 16) if i % 2 == 0 else torch.randn(PARAM_ELEMENTS)
              for i in range(NUM_PARAMS)}
    for step in range(STEPS):
        flowmap.step(step)
        for name, value in params.items():  # the bug: one message per parameter
            here.send({"name": name, "value": value.numpy()})
    p.join()


if __name__ == "__main__":
    main()
