"""Ragged per-sample arrays sent as a numpy object array (mp.Pipe, pickle).

A collator keeps each sample's per-token advantages as its own float32 array (2..6
values) in `np.empty(256, dtype=object)`; each element pickles with its own array
header. By hand (len of the pickled message): 11,970 B a message against 4,088 B of values,
2 messages a step.
"""
import multiprocessing as mp

import numpy as np

import flowmap

STEPS = 4
PER_STEP = 2
N = 256
EXPECT = {"kind": "serialisation", "seam": "collator -> learner", "bytes_per_step": 15764}


def batch(i: int) -> dict:
    adv = np.empty(N, dtype=object)
    for j in range(N):
        adv[j] = np.full(2 + (i + j) % 5, 0.5, np.float32)
    return {"advantages": adv}


def collator(conn) -> None:
    flowmap.set_owner("collator")
    for step in range(STEPS):
        flowmap.step(step)
        for i in range(PER_STEP):
            conn.send(batch(i))
        conn.recv()
    conn.close()


def main() -> None:
    flowmap.set_owner("learner")
    a, b = mp.get_context("fork").Pipe()
    p = mp.get_context("fork").Process(target=collator, args=(b,))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            a.recv()
        a.send(step)
    p.join()


if __name__ == "__main__":
    main()
