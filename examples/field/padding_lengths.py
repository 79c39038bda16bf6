"""Padded to a fixed length with a non-zero pad id, the real lengths in a Python list.

The shape of TRL/OpenRLHF-style batches sent to a remote trainer over ZMQ:
`tokens [batch, max_len]` padded with the tokenizer's pad id (151643, not 0),
and `lengths` as a plain list. No mask, no zero tails: `flowmap trace --values`
reads the list of lengths beside the `[batch, max_len]` array.

    flowmap trace --values examples/field/padding_lengths.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch
import zmq

import flowmap

BATCH, MAX_LEN, STEPS, PAD = 16, 512, 3, 151_643
LENGTHS = [40 + 29 * i for i in range(BATCH)]  # 40 .. 475
EXPECT = {"kind": "padding", "seam": "rollout -> trainer", "values": True,
          "bytes_per_step": (BATCH * MAX_LEN - sum(LENGTHS)) * 4}


def trainer(port: int) -> None:
    flowmap.set_owner("trainer")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.connect(f"tcp://127.0.0.1:{port}")
    for step in range(STEPS):
        flowmap.step(step)
        pull.recv_pyobj()
    pull.close()
    ctx.term()


def main() -> None:
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    p = mp.get_context("spawn").Process(target=trainer, args=(port,))
    p.start()
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        tokens = torch.full((BATCH, MAX_LEN), PAD, dtype=torch.int32)
        for row, n in enumerate(LENGTHS):
            tokens[row, :n] = torch.randint(0, 151_000, (n,), dtype=torch.int32)
        push.send_pyobj({"tokens": tokens, "lengths": list(LENGTHS)})
    p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
