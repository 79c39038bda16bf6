"""A tokenizer's padded batch (`input_ids`, `attention_mask`, both int64) pushed over ZMQ.

What `tokenizer(texts, padding="max_length")` returns, sent as is to a remote
trainer with `send_pyobj`: every row padded to 1024 tokens, the real ones
marked by the mask (HF's int64 mask). flowmap counts the mask's real positions
as the message leaves.

    flowmap trace examples/field/padding_zmq.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch
import zmq

import flowmap

BATCH, MAX_LEN, STEPS = 8, 1024, 3
LENGTHS = (120, 800, 333, 64, 1024, 410, 97, 250)
EXPECT = {"kind": "padding", "seam": "rollout -> trainer",
          "bytes_per_step": (BATCH * MAX_LEN - sum(LENGTHS)) * (8 + 8)}


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
        ids = torch.zeros(BATCH, MAX_LEN, dtype=torch.int64)
        mask = torch.zeros(BATCH, MAX_LEN, dtype=torch.int64)
        for row, n in enumerate(LENGTHS):
            ids[row, :n] = torch.randint(1, 151_000, (n,))
            mask[row, :n] = 1
        push.send_pyobj({"input_ids": ids, "attention_mask": mask})
    p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
