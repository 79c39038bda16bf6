"""Control for `chatty`: one message per GRPO group, streamed as groups finish (the fix is the design).

The rollout streams each group of 8 completions of one prompt as soon as it is
scored (slime's and AReaL's partial rollouts, verl's async agent loop): one
message per group, `[8, longest]` with the group's own length, sampled, so the
shapes change from step to step. These messages are the pipeline's unit, not
one transfer cut into pieces: no finding.

    flowmap trace examples/field/chatty_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import random

import torch

import flowmap

GROUPS, GROUP_SIZE, STEPS = 32, 8, 3
EXPECT = None


def rollout(q: mp.Queue, ack: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("rollout")
    rng = random.Random(3)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(GROUPS):
            longest = rng.randint(64, 1024)
            q.put({"input_ids": torch.randint(0, 151_000, (GROUP_SIZE, longest)),
                   "attention_mask": torch.ones(GROUP_SIZE, longest, dtype=torch.bool),
                   "rewards": torch.rand(GROUP_SIZE)})
        ack.get()


def main() -> None:
    ctx = mp.get_context("fork")
    q, ack = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=rollout, args=(q, ack))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(GROUPS):
            q.get()
        ack.put(step)
    p.join()


if __name__ == "__main__":
    main()
