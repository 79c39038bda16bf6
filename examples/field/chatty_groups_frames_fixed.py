"""Control for chatty: one raw multipart ZMQ message per GRPO group, 16 a step.

Each group goes as its own frames, `[prompt, responses, rewards]` (`tobytes()`), as a
rollout worker streams finished groups to the learner; the toy sampler draws the same
lengths each step (seeded per step), so every step sends the same set of frame sizes.
A group is the pipeline's unit: nothing to bucket.
"""
from __future__ import annotations

import multiprocessing as mp
import random

import numpy as np
import zmq

import flowmap

EXPECT = None
STEPS, GROUPS = 4, 16


def learner(port: int) -> None:
    flowmap.set_owner("learner")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.connect(f"tcp://127.0.0.1:{port}")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(GROUPS):
            pull.recv_multipart()
    pull.close()
    ctx.term()


def main() -> None:
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    p = mp.get_context("spawn").Process(target=learner, args=(port,))
    p.start()
    flowmap.set_owner("sampler")
    for step in range(STEPS):
        flowmap.step(step)
        rng = random.Random(0)
        for _ in range(GROUPS):
            plen, rlen = rng.randint(20, 80), rng.randint(30, 200)
            prompt = np.random.randint(0, 32000, plen, dtype=np.int32)
            responses = np.random.randint(0, 32000, (8, rlen), dtype=np.int32)
            rewards = np.random.rand(8).astype(np.float32)
            push.send_multipart([prompt.tobytes(), responses.tobytes(), rewards.tobytes()])
    p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
