"""Stale trajectories filtered out of a received batch (mp.Pipe, a list of dataclasses).

An actor sends one list of 8 `Traj(version, tokens int64 [300], logp float32 [300])` a
step; the learner drops the 3 whose version lags with `flowmap.drop(stale, "stale")`.
By hand: 3 x 300 x 12 B = 10,800 B/step dropped.
"""
import dataclasses
import multiprocessing as mp

import torch

import flowmap

STEPS = 4
PER_BATCH = 8
EXPECT = {"kind": "dropped", "seam": "actor -> learner", "bytes_per_step": 10800}


@dataclasses.dataclass
class Traj:
    version: int
    tokens: torch.Tensor
    logp: torch.Tensor


def actor(conn) -> None:
    flowmap.set_owner("actor")
    for step in range(STEPS):
        flowmap.step(step)
        conn.send([Traj(step - 2 if i < 3 else step, torch.randint(0, 30000, (300,)),
                        torch.randn(300)) for i in range(PER_BATCH)])
        conn.recv()


def main() -> None:
    flowmap.set_owner("learner")
    a, b = mp.get_context("fork").Pipe()
    p = mp.get_context("fork").Process(target=actor, args=(b,))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        batch = a.recv()
        stale = [t for t in batch if t.version < step - 1]
        flowmap.drop(stale, "stale")
        a.send(step)
    p.join()


if __name__ == "__main__":
    main()
