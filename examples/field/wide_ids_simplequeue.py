"""Discrete actions as int64 through a SimpleQueue, where 8 bits hold them.

Environment workers (Atari-style, 18 actions) send their rollouts' `actions
[envs, horizon]` with numpy's default int64 to the learner through a
`multiprocessing.SimpleQueue`, beside the float32 observations' values.
`flowmap trace --values` samples the actions' range, 0..17.

    flowmap trace --values examples/field/wide_ids_simplequeue.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

import flowmap

ENVS, HORIZON, ACTIONS, STEPS = 64, 128, 18, 3
EXPECT = {"kind": "wide_ids", "seam": "actor -> learner", "values": True,
          "bytes_per_step": ENVS * HORIZON * 8 * 7 / 8}


def actor(q: mp.SimpleQueue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("actor")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        q.put({"actions": rng.integers(0, ACTIONS, (ENVS, HORIZON)),
               "values": rng.standard_normal((ENVS, HORIZON)).astype(np.float32)})


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.SimpleQueue()
    p = ctx.Process(target=actor, args=(q,))
    p.start()
    flowmap.set_owner("learner")
    for step in range(STEPS):
        flowmap.step(step)
        q.get()
    p.join()


if __name__ == "__main__":
    main()
