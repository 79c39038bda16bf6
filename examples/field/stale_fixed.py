"""Control for `dropped`: the staleness bound checked before sending (the fix applied).

`stale_queue.py` with the rollout worker told the learner's version: it stops
sending trajectories the learner would drop and regenerates them on the new
policy. Every message that crosses is trained on: no finding.

    flowmap trace examples/field/stale_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

import flowmap

PER_STEP, TOKENS, STEPS = 8, 1024, 3
EXPECT = None


def rollout(q: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            q.put({"version": step, "tokens": np.zeros(TOKENS, dtype=np.int64),
                   "logprobs": np.zeros(TOKENS, dtype=np.float32)})


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=rollout, args=(q,))
    p.start()
    flowmap.set_owner("learner")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            traj = q.get()
            if traj["version"] < step:
                flowmap.drop([], reason="stale")
    p.join()


if __name__ == "__main__":
    main()
