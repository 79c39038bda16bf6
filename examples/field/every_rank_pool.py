"""The same batch sent whole to every worker of an mp.Pool; each keeps its rows.

Each step the driver calls pool.starmap(score, [(batch, r, 4) for r in range(4)]): the
batch dict (numpy input_ids int64[64,256] = 131,072 B, mask int8[64,256] = 16,384 B)
is pickled into every one of the 4 tasks, and each worker reads rows r::4.
(Were every task taken by one worker, the duplicate detector would see one destination and,
by its guard against a buffer refilled in place, say nothing: the sleep keeps both busy.)
Hand figure: 4 copies of 147,456 B where one in total (each worker's part) would do:
3 x 147,456 = 442,368 B/step extra.
Expected: duplicate on driver -> pool workers, ~442 KB/step.
"""
import multiprocessing as mp
import time

import numpy as np

import flowmap

STEPS = 3
W = 4
EXPECT = {"kind": "duplicate", "seam": "driver -> pool",
          "bytes_per_step": (W - 1) * (64 * 256 * 8 + 64 * 256 * 1)}



def score(batch, rank, world):
    with flowmap.owner("scorer"):
        time.sleep(0.2)  # scoring takes a while: the other worker takes the next task
        rows = batch["input_ids"][rank::world]
        m = batch["mask"][rank::world]
        return float((rows * m).sum())


def main():
    with flowmap.owner("driver"), mp.get_context("spawn").Pool(2) as pool:
        for s in range(STEPS):
            flowmap.step(s)
            batch = {"input_ids": np.random.randint(0, 1000, (64, 256), dtype=np.int64),
                     "mask": np.ones((64, 256), dtype=np.int8)}
            out = pool.starmap(score, [(batch, r, W) for r in range(W)], chunksize=1)
            assert len(out) == W


if __name__ == "__main__":
    main()
