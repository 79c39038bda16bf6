"""The whole batch bound into every pool task: `pool.map(partial(score, batch), shards)`.
The shape of a reward stage that fans a step's batch out to a `multiprocessing.Pool` by
binding it with `functools.partial`: each task message pickles the whole batch again,
though each task reads only its quarter of the rows (the `every_rank` bug through a
pool; slime #2384's whole batch to every rank). Annotated with `flowmap.owner` and
`flowmap.step` only. Fix: map over the shards themselves (`every_rank_pool_fixed.py`).

    flowmap trace examples/field/every_rank_pool_partial.py && flowmap report
"""
import functools
import multiprocessing as mp

import numpy as np

import flowmap

EXPECT = {"kind": "duplicate", "seam": "driver -> pool", "bytes_per_step": 786432}

STEPS = 5
SHARDS = 4
B, T = 64, 512
# batch: responses int32 [64,512] = 131072 B + ref_logp float32 [64,512] = 131072 B
# = 262144 B pickled into each of 4 task messages; all copies but one:
# 3 x 262144 = 786432 B/step


def score_shard(batch, k):
    rows = B // SHARDS
    part = batch["responses"][k * rows:(k + 1) * rows]
    return float((part % 11 == 0).mean())


def main():
    with mp.Pool(2) as pool:
        with flowmap.owner("driver"):
            rng = np.random.default_rng(0)
            for step in range(STEPS):
                flowmap.step(step)
                batch = {"responses": rng.integers(0, 32000, (B, T), dtype=np.int32),
                         "ref_logp": -rng.random((B, T), dtype=np.float32)}
                scores = pool.map(functools.partial(score_shard, batch), range(SHARDS), chunksize=1)
        print([round(s, 3) for s in scores])


if __name__ == "__main__":
    main()
