"""Reward scoring fanned out with `concurrent.futures.ProcessPoolExecutor`: each task the
driver submits carries the whole response batch and a shard index, and each worker scores
only its shard. The batch is pickled into every task. The executor's manager thread sends
the tasks; they are the driver's, who submitted them. Which worker takes a task is the
pool's choice: two tasks to one worker are two copies all the same.
The fix: submit each task its own rows (`batch[rows]`).

    flowmap trace examples/field/every_task_process_pool.py && flowmap report
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

import flowmap

STEPS, WORKERS, B, T = 4, 2, 64, 512
# the batch: response_ids int32 [64, 512] and response_lens int32 [64]; 2 tasks a step, one
# copy more than needed (the shard index, 8 B, rides along)
EXPECT = {"kind": "duplicate", "seam": "driver -> process_pool",
          "bytes_per_step": B * T * 4 + B * 4}


def score_shard(batch: dict[str, Any], shard: int, n_shards: int) -> list[float]:
    rows = slice(shard * B // n_shards, (shard + 1) * B // n_shards)
    ids, lens = batch["response_ids"][rows], batch["response_lens"][rows]
    return [float((ids[i, :lens[i]] % 2 == 0).mean()) for i in range(ids.shape[0])]


def main() -> None:
    rng = np.random.default_rng(4)
    with flowmap.owner("driver"), ProcessPoolExecutor(max_workers=WORKERS) as ex:
        list(ex.map(abs, range(WORKERS)))  # the workers start
        for step in range(STEPS):
            flowmap.step(step)
            batch = {"response_ids": rng.integers(0, 32000, (B, T), dtype=np.int32),
                     "response_lens": rng.integers(1, T, B, dtype=np.int32)}
            futures = [ex.submit(score_shard, batch, k, WORKERS) for k in range(WORKERS)]
            rewards = [r for f in futures for r in f.result()]
            assert len(rewards) == B


if __name__ == "__main__":
    main()
