"""Routing replay for the whole conversation returned every turn, through a pipe.

sgl-project/sglang #24851: with routing replay on, each turn's reply carries
`routed_experts [tokens, layers, topk]` for every token of the conversation, so
earlier turns' rows are sent again and again. Two conversations interleaved,
six turns each, lengths differ by conversation, through a `multiprocessing`
pipe (torch's reductions put the tensor in shared memory).

    flowmap trace examples/field/prefix_pipe.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch

import flowmap

TURNS, LAYERS, TOPK, STEPS = 6, 8, 4, 3
TURN_TOKENS = (40, 72)  # per conversation
# resent per step: turns 1..5 of each conversation again, int32 [tokens, 8, 4] = 128 B a token
EXPECT = {"kind": "prefix_resend", "seam": "engine -> rollout",
          "bytes_per_step": (40 + 72) * (1 + 2 + 3 + 4 + 5) * LAYERS * TOPK * 4}


def engine(conn: mp.connection.Connection) -> None:
    flowmap.set_owner("engine")
    for step in range(STEPS):
        flowmap.step(step)
        for turn in range(1, TURNS + 1):
            for tokens in TURN_TOKENS:
                n = turn * tokens
                conn.send({"routed_experts": torch.randint(0, 64, (n, LAYERS, TOPK),
                                                           dtype=torch.int32)})
    conn.recv()  # torch passes each tensor's fd: stay alive until the receiver has them all


def main() -> None:
    ctx = mp.get_context("fork")
    here, there = ctx.Pipe()
    p = ctx.Process(target=engine, args=(there,))
    p.start()
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(TURNS * len(TURN_TOKENS)):
            here.recv()
    here.send(None)
    p.join()


if __name__ == "__main__":
    main()
