"""Discrete actions (6 of them) stored as int64 (mp.Pipe, numpy, a tuple).

`(obs float32 [64, 32, 4], actions int64 [64, 32])`, two a step; the actions take values
0..5. By hand: 16,384 B of actions a message; uint8 holds them: 2 x 16,384 x 7/8 =
28,672 B/step.
"""
import multiprocessing as mp

import numpy as np

import flowmap

STEPS = 4
PER_STEP = 2
EXPECT = {"kind": "wide_ids", "seam": "envs -> learner", "bytes_per_step": 28672,
          "values": True}


def envs(conn) -> None:
    flowmap.set_owner("envs")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            conn.send((rng.random((64, 32, 4), dtype=np.float32),
                       rng.integers(0, 6, (64, 32)).astype(np.int64)))
        conn.recv()


def main() -> None:
    flowmap.set_owner("learner")
    a, b = mp.get_context("fork").Pipe()
    p = mp.get_context("fork").Process(target=envs, args=(b,))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            a.recv()
        a.send(step)
    p.join()


if __name__ == "__main__":
    main()
