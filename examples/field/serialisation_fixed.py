"""Control for `serialisation`: the same rewards sent as one array per sample (the fix applied).

`serialisation_queue.py` with the per-token loop replaced by one float32 array
per sample: the pickle carries the array's bytes and one header. flowmap must
not call this serialisation bloat.

    flowmap trace examples/field/serialisation_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

import flowmap

SAMPLES, TOKENS, STEPS = 4, 256, 3
EXPECT = None


def reward(q: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("reward")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(SAMPLES):
            q.put({"token_rewards": rng.standard_normal(TOKENS).astype(np.float32)})


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=reward, args=(q,))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(SAMPLES):
            q.get()
    p.join()


if __name__ == "__main__":
    main()
