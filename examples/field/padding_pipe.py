"""Routing replay padded to the batch's fixed length, sent through a pipe with no mask.

Routed experts `[batch, max_len, layers, topk]` (int32), rows past each
sample's end left zero (SkyRL #2235's replay arrays, without the mask that
`padding.py` carries), through a `multiprocessing` pipe (torch puts the tensor
in shared memory). `flowmap trace --values` sees the zero tails.

    flowmap trace --values examples/field/padding_pipe.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch

import flowmap

BATCH, MAX_LEN, LAYERS, TOPK, STEPS = 4, 512, 4, 8, 3
LENGTHS = (100, 250, 512, 38)
EXPECT = {"kind": "padding", "seam": "rollout -> trainer", "values": True,
          "bytes_per_step": (BATCH * MAX_LEN - sum(LENGTHS)) * LAYERS * TOPK * 4}


def rollout(conn: mp.connection.Connection) -> None:
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        experts = torch.zeros(BATCH, MAX_LEN, LAYERS, TOPK, dtype=torch.int32)
        for row, n in enumerate(LENGTHS):
            experts[row, :n] = torch.randint(1, 64, (n, LAYERS, TOPK), dtype=torch.int32)
        conn.send({"routed_experts": experts})
    conn.recv()  # torch passes the tensor's fd: stay alive until the receiver has it


def main() -> None:
    ctx = mp.get_context("fork")
    here, there = ctx.Pipe()
    p = ctx.Process(target=rollout, args=(there,))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        here.recv()
    here.send(None)
    p.join()


if __name__ == "__main__":
    main()
