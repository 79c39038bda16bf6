"""Control for `wide_ids`: expert ids as uint8, token ids and positions as int64 (the fix applied).

Routed experts cast to uint8 before they leave the engine, as prime-rl ships
them; the batch's token ids (a 151k vocabulary) and positions stay int64, as
every trainer takes them. Through a `multiprocessing` queue, traced with and
without `--values`: no finding.

    flowmap trace --values examples/field/wide_ids_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

import flowmap

TOKENS, LAYERS, TOPK, EXPERTS, STEPS = 512, 8, 4, 64, 3
EXPECT = None


def rollout(q: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("rollout")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        q.put({"routed_experts": rng.integers(0, EXPERTS, (TOKENS, LAYERS, TOPK), dtype=np.uint8),
               "input_ids": rng.integers(0, 151_000, (1, TOKENS)),
               "position_ids": np.arange(TOKENS)[None]})


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=rollout, args=(q,))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        q.get()
    p.join()


if __name__ == "__main__":
    main()
