"""Stale rollouts discarded by an async trainer that pulls them from ZMQ.

AReaL/slime-style asynchronous RL: generation servers PUSH finished samples
(`send_pyobj`) with the weight version they were sampled with; the trainer
PULLs and discards those older than its staleness bound, recording the drop
without ids (`flowmap.drop([], reason="stale")`).

    flowmap trace examples/field/stale_zmq.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch
import zmq

import flowmap

PER_STEP, TOKENS, STEPS = 6, 2048, 3
STALE = 3
EXPECT = {"kind": "dropped", "seam": "generator -> trainer",
          "bytes_per_step": STALE * TOKENS * 4 * 2}  # int32 ids and float32 log-probs


def generator(port: int) -> None:
    flowmap.set_owner("generator")
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port}")
    for step in range(STEPS):
        flowmap.step(step)
        for i in range(PER_STEP):
            push.send_pyobj({"weight_version": step - 2 * (i < STALE),
                             "ids": torch.zeros(TOKENS, dtype=torch.int32),
                             "logprobs": torch.zeros(TOKENS)})
    push.close()
    ctx.term()


def main() -> None:
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    p = mp.get_context("spawn").Process(target=generator, args=(port,))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            sample = pull.recv_pyobj()
            if step - sample["weight_version"] > 1:
                flowmap.drop([], reason="stale")
    p.join()
    pull.close()
    ctx.term()


if __name__ == "__main__":
    main()
