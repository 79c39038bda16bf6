"""GRPO groups filtered out after the trip: every reward equal, no advantage (DAPO's filter).

Dynamic sampling (DAPO, verl's `filter_groups`): groups whose completions all
got the same reward carry no gradient and are dropped at the trainer, after
they crossed the pipe from the rollout worker. Recorded without ids,
`flowmap.drop([], reason="zero_advantage")`.

    flowmap trace examples/field/stale_pipe.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

import flowmap

GROUPS, GROUP_SIZE, TOKENS, STEPS = 8, 4, 256, 3
FLAT = 3  # groups per step whose rewards are all equal
EXPECT = {"kind": "dropped", "seam": "rollout -> trainer",
          "bytes_per_step": FLAT * (GROUP_SIZE * TOKENS * 8 + GROUP_SIZE * 4)}


def rollout(conn: mp.connection.Connection) -> None:
    flowmap.set_owner("rollout")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        for g in range(GROUPS):
            rewards = (np.ones(GROUP_SIZE) if g < FLAT else rng.random(GROUP_SIZE))
            conn.send({"ids": np.zeros((GROUP_SIZE, TOKENS), dtype=np.int64),
                       "rewards": rewards.astype(np.float32)})


def main() -> None:
    ctx = mp.get_context("fork")
    here, there = ctx.Pipe()
    p = ctx.Process(target=rollout, args=(there,))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(GROUPS):
            group = here.recv()
            if group["rewards"].std() == 0:
                flowmap.drop([], reason="zero_advantage")
    p.join()


if __name__ == "__main__":
    main()
