"""Top-k expert indices as int32 over ZMQ, where 8 bits hold them.

sglang #31219: the router's `topk_ids [tokens, topk]` leave the engine as
int32 for 128 experts, pickled onto a ZMQ PUSH socket (`send_pyobj`).
`flowmap trace --values` samples their range, 0..127.

    flowmap trace --values examples/field/wide_ids_zmq.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch
import zmq

import flowmap

TOKENS, TOPK, EXPERTS, STEPS = 2048, 8, 128, 3
# int32 -> uint8 spares 3 of each 4 bytes
EXPECT = {"kind": "wide_ids", "seam": "engine -> trainer", "values": True,
          "bytes_per_step": TOKENS * TOPK * 4 * 3 / 4}


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
    flowmap.set_owner("engine")
    for step in range(STEPS):
        flowmap.step(step)
        push.send_pyobj({"topk_ids": torch.randint(0, EXPERTS, (TOKENS, TOPK), dtype=torch.int32),
                         "topk_weights": torch.rand(TOKENS, TOPK, dtype=torch.bfloat16)})
    p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
