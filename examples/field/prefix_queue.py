"""Multi-turn agent loop: the engine process returns the whole conversation's arrays every turn.

The pattern of sgl-project/sglang #24851 and of agent loops that re-send
`prompt_ids + response_ids` with their log-probs each turn: four conversations
in flight, interleaved, each turn's reply (through a `multiprocessing` queue)
carries every earlier turn's tokens again. No item ids: flowmap finds the
conversations from the growing first dimension of successive messages.

    flowmap trace examples/field/prefix_queue.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

import flowmap

CONVERSATIONS, TURNS, STEPS = 4, 4, 3
TURN_TOKENS = (96, 128, 160, 200)  # tokens each turn adds, per conversation
# resent per step: each conversation's turns 1..3 again, 8 B id + 4 B log-prob per token
EXPECT = {"kind": "prefix_resend", "seam": "engine -> agent_loop",
          "bytes_per_step": (96 + 128 + 160 + 200) * (1 + 2 + 3) * 12}


def engine(q: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("engine")
    for step in range(STEPS):
        flowmap.step(step)
        for turn in range(1, TURNS + 1):
            for c in range(CONVERSATIONS):  # interleaved: one turn of each in flight
                n = turn * TURN_TOKENS[c]
                q.put({"token_ids": np.arange(n, dtype=np.int64),
                       "logprobs": np.zeros(n, dtype=np.float32)})


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=engine, args=(q,))
    p.start()
    flowmap.set_owner("agent_loop")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(TURNS * CONVERSATIONS):
            q.get()
    p.join()


if __name__ == "__main__":
    main()
