"""Control for the view shapes: the row is cloned before it is sent.

The fix of `view_pipe.py` (pytorch/pytorch #182105): `block[i].clone()` owns an 8 KiB
storage, so only the row moves. Annotated with `flowmap.owner` and `flowmap.step` only.
No `view` finding is due.

    flowmap trace examples/field/view_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import torch

import flowmap

ROWS, COLS, STEPS = 512, 2048, 3
EXPECT = None


def learner(conn: Any, done: Any) -> None:
    with flowmap.owner("learner"):
        for step in range(STEPS):
            flowmap.step(step)
            assert conn.recv().shape == (COLS,)
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
            tx.send(block[int(block[:, 0].argmax())].clone())  # the fix
    done.wait()
    p.join()


if __name__ == "__main__":
    main()
