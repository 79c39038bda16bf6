"""Stale trajectories dropped by passing the objects to flowmap.drop (mp.Queue, dataclass).

An actor sends 6 trajectories a step, `Traj(version, tokens int64 [1, 200], logp float32
[1, 200])`; the learner drops the 2 whose policy version lags, calling
`flowmap.drop(stale, "stale")` with the trajectory objects (no ids were ever tagged).
By hand: 2 x 200 x 12 B = 4,800 B/step dropped.
"""
import dataclasses
import multiprocessing as mp

import torch

import flowmap

STEPS = 4
PER_STEP = 6
EXPECT = {"kind": "dropped", "seam": "actor -> learner", "bytes_per_step": 4800}


@dataclasses.dataclass
class Traj:
    version: int
    tokens: torch.Tensor
    logp: torch.Tensor


def actor(q, done) -> None:
    flowmap.set_owner("actor")
    for step in range(STEPS):
        flowmap.step(step)
        for i in range(PER_STEP):
            v = step - 2 if i < 2 else step
            q.put(Traj(v, torch.randint(0, 32000, (1, 200)), torch.randn(1, 200)))
    done.wait()


def main() -> None:
    flowmap.set_owner("learner")
    ctx = mp.get_context("fork")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=actor, args=(q, done))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        got = [q.get() for _ in range(PER_STEP)]
        stale = [t for t in got if t.version < step - 1]
        flowmap.drop(stale, "stale")
    done.set()
    p.join()


if __name__ == "__main__":
    main()
