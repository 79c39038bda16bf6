"""Control for `serialisation` of text: completions as text, numbers as raw float32 bytes.

`serialisation_json_text.py` with the fix applied: the reward server sends each
sample's advantages as the bytes of one float32 array (`numpy().tobytes()`), and
the rollout sends the completions it wrote as text, which is what text is for.
Neither may be called serialisation bloat.

    flowmap trace examples/field/serialisation_json_text_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import random

import numpy as np
import torch

import flowmap

SAMPLES, TOKENS, STEPS = 8, 512, 3
EXPECT = None
WORDS = ("the", "answer", "is", "seven", "because", "three", "plus", "four", "equals", "so")


def reward(conn: mp.connection.Connection) -> None:
    flowmap.set_owner("reward")
    torch.manual_seed(0)
    rng = random.Random(0)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(SAMPLES):
            conn.send_bytes(torch.randn(TOKENS).numpy().tobytes())
            conn.send(" ".join(rng.choice(WORDS) for _ in range(600)))  # a completion


def main() -> None:
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    p = ctx.Process(target=reward, args=(there,))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(SAMPLES):
            np.frombuffer(here.recv_bytes(), dtype=np.float32)
            here.recv()
    p.join()


if __name__ == "__main__":
    main()
