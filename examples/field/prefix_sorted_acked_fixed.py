"""Control: packed micro-batches sorted by length, each acknowledged, are not a resent prefix.

The shape of dynamic batching (verl's `use_dynamic_bsz`, OpenRLHF's packing) over a
request/reply channel: the loader packs each step's sequences into 1-D micro-batches,
shortest first (1,024 to 4,096 tokens), and sends them to the trainer one at a time; the
trainer answers each with the tokens it consumed before the next comes. Every message is
longer than the last and each follows an answer, but the answer is not part of the next
message: each micro-batch holds other sequences, nothing is resent. A conversation's next
turn holds the answer (`prefix_env_workers.py`).

    flowmap trace examples/field/prefix_sorted_acked_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import torch

import flowmap

STEPS, MICRO, BASE = 4, 4, 1024
EXPECT = None


def trainer(batches: mp.Queue, acks: mp.Queue, done: Any) -> None:
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(MICRO):
            ids = batches.get()["input_ids"]
            acks.put(torch.tensor([ids.numel()]))  # tokens consumed, int64 like the ids
    done.wait()  # a tensor put on a queue is read from its sender: stay until the last is


def main() -> None:
    ctx = mp.get_context("spawn")
    batches, acks, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    p = ctx.Process(target=trainer, args=(batches, acks, done))
    p.start()
    flowmap.set_owner("loader")
    for step in range(STEPS):
        flowmap.step(step)
        for k in range(MICRO):
            batches.put({"input_ids": torch.randint(1, 32000, (BASE * (k + 1),))})
            acks.get()
    done.set()
    p.join()


if __name__ == "__main__":
    main()
