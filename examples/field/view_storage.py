"""A one-row view sent through a torch.multiprocessing queue carries its whole storage.

Reported in pytorch/pytorch #182105 (and #65604): sharing `t[:1]` of a 4 MiB
tensor moves the 4 MiB storage into shared memory, not the 4 KiB row. Each
step the actor computes a fresh block of logits and sends the learner one row
of it. flowmap's `view` finding names the seam and the storage behind the view;
the fix is `row.clone()`.

    flowmap trace examples/field/view_storage.py && flowmap report
"""

from __future__ import annotations

import torch
import torch.multiprocessing as mp

import flowmap

ROWS, COLS, STEPS = 1024, 1024, 3  # float32: a 4 MiB block, a 4 KiB row


def learner(q: mp.Queue) -> None:
    flowmap.set_owner("learner")
    for _ in range(STEPS):
        q.get()


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=learner, args=(q,))
    p.start()
    flowmap.set_owner("actor")
    for step in range(STEPS):
        flowmap.step(step)
        logits = torch.randn(ROWS, COLS)
        q.put(logits[:1])  # the bug: a view of the whole block; `logits[:1].clone()` sends 4 KiB
    p.join()


if __name__ == "__main__":
    main()
