"""One row of a fresh block sent down a `Pipe` as a torch view: the whole block moves.

pytorch/pytorch #182105 through a `multiprocessing.Pipe` (torch's reducers are registered on
every `ForkingPickler`): each step the policy process scores a block of candidates and sends
the learner the best row, `block[i]`, whose storage is the whole block; torch moves that
storage into shared memory. Annotated with `flowmap.owner` and `flowmap.step` only. The fix
(`view_fixed.py`): `block[i].clone()`.

    flowmap trace examples/field/view_pipe.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import torch

import flowmap

ROWS, COLS, STEPS = 512, 2048, 3  # float32: a 4 MiB block, an 8 KiB row
EXPECT = {"kind": "view", "seam": "policy -> learner", "bytes_per_step": (ROWS - 1) * COLS * 4}


def learner(conn: Any, done: Any) -> None:
    with flowmap.owner("learner"):
        for step in range(STEPS):
            flowmap.step(step)
            row = conn.recv()
            assert row.shape == (COLS,)
        done.set()


def main() -> None:
    ctx = mp.get_context("fork")
    rx, tx = ctx.Pipe(False)
    done = ctx.Event()
    p = ctx.Process(target=learner, args=(rx, done))
    p.start()
    with flowmap.owner("policy"):
        for step in range(STEPS):
            flowmap.step(step)
            block = torch.randn(ROWS, COLS)
            tx.send(block[int(block[:, 0].argmax())])  # the bug: a view of the whole block
    done.wait()  # torch shares storages by fd: the sender lives until they are taken
    p.join()


if __name__ == "__main__":
    main()
