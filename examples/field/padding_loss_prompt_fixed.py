"""Control for `padding`: full rows whose loss mask zeroes each row's prompt.

A collator that cuts every sample to the same length (prompt and response fill all
256 positions, nothing padded) and marks the response tokens with a `loss_mask`:
each row starts with its prompt's zeros (40 to 100 of them) and ends filled. Rows that
all end filled are what left padding looks like, but these zeros are tokens a loss is
not taken over; flowmap must not call them padding.

    flowmap trace examples/field/padding_loss_prompt_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import torch

import flowmap

ROWS, POSITIONS, STEPS = 4, 256, 3
EXPECT = None


def collator(q: mp.Queue, done: Any) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("collator")
    g = torch.Generator().manual_seed(0)
    for step in range(STEPS):
        flowmap.step(step)
        loss_mask = torch.ones(ROWS, POSITIONS, dtype=torch.int64)
        for r in range(ROWS):
            loss_mask[r, : 40 + 20 * r] = 0  # the prompt
        q.put({"input_ids": torch.randint(1, 30_000, (ROWS, POSITIONS), generator=g),
               "loss_mask": loss_mask, "old_logprobs": torch.randn(ROWS, POSITIONS, generator=g)})
    done.wait()  # torch shares the tensors by file descriptor: alive until they are taken


def main() -> None:
    ctx = mp.get_context("spawn")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=collator, args=(q, done))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        batch = q.get()
        float((batch["old_logprobs"] * batch["loss_mask"]).sum())
    done.set()
    p.join()


if __name__ == "__main__":
    main()
