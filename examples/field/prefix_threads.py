"""Whole histories from conversation threads: three conversations, one queue, no fixed order.

An environment process runs each conversation in a thread of its own; after every turn
the thread puts the whole token history so far (`int64 [L]`) on one
`multiprocessing.Queue` to the trainer. Prompts of 200, 300 and 400 tokens, 100 tokens a
turn, 4 turns; the threads' timing interleaves the turns in no fixed order. The fix
sends each turn's new tokens only (`prefix_delta_fixed.py`).
By hand: each conversation resends its first 3 histories, (3P + 300) tokens x 8 B.

    flowmap trace examples/field/prefix_threads.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import random
import threading
import time

import numpy as np

import flowmap

STEPS, TURNS, PROMPTS, GROW = 3, 4, (200, 300, 400), 100
EXPECT = {"kind": "prefix_resend", "seam": "env -> trainer",
          "bytes_per_step": sum(3 * p + 3 * GROW for p in PROMPTS) * 8}


def conversation(q: mp.Queue, step: int, k: int) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("env")
    pause, rng = random.Random(10 * step + k), np.random.default_rng(10 * step + k)
    history = rng.integers(0, 32000, PROMPTS[k], dtype=np.int64)
    for turn in range(TURNS):
        time.sleep(pause.uniform(0.005, 0.03))
        if turn:
            history = np.concatenate([history, rng.integers(0, 32000, GROW, dtype=np.int64)])
        q.put({"conversation": f"{step}-{k}", "turn": turn, "history": history})


def env(q: mp.Queue, go) -> None:  # type: ignore[no-untyped-def,type-arg]
    flowmap.set_owner("env")
    for step in range(STEPS):
        flowmap.step(step)
        go.wait()
        go.clear()
        threads = [threading.Thread(target=conversation, args=(q, step, k))
                   for k in range(len(PROMPTS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def main() -> None:
    flowmap.set_owner("trainer")
    ctx = mp.get_context("fork")
    q, go = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=env, args=(q, go))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        go.set()
        for _ in range(len(PROMPTS) * TURNS):
            q.get()
    p.join()


if __name__ == "__main__":
    main()
