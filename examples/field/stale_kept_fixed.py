"""Control for stale drops: the learner checks each trajectory's version and keeps them all
(the actor waits for the new weights; nothing goes stale). mp.Queue, dataclass, torch."""
import dataclasses
import multiprocessing as mp

import torch

import flowmap

EXPECT = None
STEPS = 4
PER_STEP = 6


@dataclasses.dataclass
class Traj:
    version: int
    tokens: torch.Tensor
    logp: torch.Tensor


def actor(q, done) -> None:
    flowmap.set_owner("actor")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            q.put(Traj(step, torch.randint(0, 32000, (1, 200), dtype=torch.int32),
                       torch.randn(1, 200)))
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
        if stale:
            flowmap.drop(stale, "stale")
    done.set()
    p.join()


if __name__ == "__main__":
    main()
