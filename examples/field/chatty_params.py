"""Weight sync as one (name, array) per parameter (mp.SimpleQueue, numpy, pickle).

16 parameters of 4 kinds each step, sent one by one. By hand: 16 messages a step where
one bucket would do: 15 x 65,536 = 983,040 B/step.
"""
import multiprocessing as mp

import numpy as np

import flowmap

STEPS = 4
EXPECT = {"kind": "chatty", "seam": "learner -> actor", "bytes_per_step": 983040}


def actor(q, n: int) -> None:
    flowmap.set_owner("actor")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(n):
            q.get()


def main() -> None:
    flowmap.set_owner("learner")
    state = {}
    for i in range(4):
        state[f"h{i}.w"] = np.zeros((48, 48), np.float32)
        state[f"h{i}.b"] = np.zeros(48, np.float32)
        state[f"h{i}.ln.g"] = np.ones(48, np.float32)
        state[f"h{i}.ln.b"] = np.zeros(48, np.float32)
    q = mp.get_context("fork").SimpleQueue()
    p = mp.get_context("fork").Process(target=actor, args=(q, len(state)))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for name, a in state.items():
            q.put((name, a + step))
    p.join()


if __name__ == "__main__":
    main()
