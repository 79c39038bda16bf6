"""Trajectories generated, queued, then dropped as stale: the bytes spent on them for nothing.

Reported in thinking-machines-lab/tinker-cookbook #822 (off-policy samples
generated and thrown away). Rollout workers put trajectories in a
`multiprocessing` queue, tagged with their ids (`flowmap.tag_items`); the
learner drops those more than one version old (`flowmap.drop`). flowmap's
`dropped` finding counts the queue bytes of the dropped trajectories.

    flowmap trace examples/field/stale_drop.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

import flowmap

PER_STEP, TOKENS, STEPS = 8, 512, 3
STALE_EVERY = 4  # one trajectory in four is stale when it arrives
EXPECT = {"kind": "dropped", "seam": "rollout -> learner",
          "bytes_per_step": PER_STEP // STALE_EVERY * TOKENS * 8}


def rollout(q: mp.Queue) -> None:
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        for i in range(PER_STEP):
            uid = step * PER_STEP + i
            traj = {"uid": uid, "version": step - (i % STALE_EVERY == 0),
                    "tokens": np.zeros(TOKENS, dtype=np.int64)}
            q.put(flowmap.tag_items(traj, [uid]))


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
                flowmap.drop([traj["uid"]], reason="stale")
    p.join()


if __name__ == "__main__":
    main()
