"""Control for every_rank_pool.py: each task carries only its worker's rows."""
import multiprocessing as mp

import numpy as np

import flowmap

STEPS = 3
W = 4
EXPECT = None



def score(part):
    with flowmap.owner("scorer"):
        return float((part["input_ids"] * part["mask"]).sum())


def main():
    with flowmap.owner("driver"), mp.get_context("spawn").Pool(2) as pool:
        for s in range(STEPS):
            flowmap.step(s)
            batch = {"input_ids": np.random.randint(0, 1000, (64, 256), dtype=np.int64),
                     "mask": np.ones((64, 256), dtype=np.int8)}
            parts = [{k: np.ascontiguousarray(v[r::W]) for k, v in batch.items()}
                     for r in range(W)]
            out = pool.map(score, parts, chunksize=1)
            assert len(out) == W


if __name__ == "__main__":
    main()
