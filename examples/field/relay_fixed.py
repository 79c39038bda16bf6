"""Control for the relay shapes: the generator sends rollouts to the trainer directly.

The fix of `relay_mp_queue.py`: the controller gets only what it decides with (the
rollout's length and a summary), the trainer gets the tensors from the generator's queue.
Annotated with `flowmap.owner` and `flowmap.step` only. No `pass_through` is due.

    flowmap trace examples/field/relay_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import torch

import flowmap

GROUPS, TOKENS, STEPS = 16, 256, 3
EXPECT = None


def generator(to_trainer: Any, to_controller: Any, done: Any) -> None:
    with flowmap.owner("generator"):
        for step in range(STEPS):
            flowmap.step(step)
            tokens = torch.randint(0, 32000, (GROUPS, TOKENS), dtype=torch.int32)
            to_trainer.put({"tokens": tokens, "logprobs": torch.randn(GROUPS, TOKENS)})
            to_controller.put({"groups": GROUPS, "mean_len": float(TOKENS)})
        done.wait()  # torch shares storages by fd: the sender lives until they are taken


def controller(inbox: Any, to_trainer: Any, done: Any) -> None:
    with flowmap.owner("controller"):
        for step in range(STEPS):
            flowmap.step(step)
            summary = inbox.get()
            to_trainer.put({"step": step, "lr_scale": 1.0 if summary["groups"] else 0.0})
        done.wait()


def main() -> None:
    ctx = mp.get_context("spawn")
    data, info, orders, done = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=generator, args=(data, info, done)),
             ctx.Process(target=controller, args=(info, orders, done))]
    for p in procs:
        p.start()
    with flowmap.owner("trainer"):
        for step in range(STEPS):
            flowmap.step(step)
            batch, order = data.get(), orders.get()
            assert batch["tokens"].shape == (GROUPS, TOKENS) and order["step"] == step
    done.set()
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
