"""An agent loop sends each turn's whole context back to the learner (mp.Pipe, dataclass, torch).

Four conversations with long system prompts (320..416 tokens) and short turns (24..56 new
tokens), interleaved in a shuffled order each round; 5 turns a step. A turn's message holds
`tokens int64 [1, L]` and `logp float32 [1, L]`: 12 B a token. By hand the resent rows per
step are every message's length but the last per conversation:
  sum over c of sum_{k<4} L_c,k  (computed in `resent_tokens()`) x 12 B.
"""
import dataclasses
import multiprocessing as mp
import random

import torch

import flowmap

STEPS = 4
PROMPTS = [320, 352, 384, 416]
GROW = [24, 40, 56, 32]
TURNS = 5


def lengths(c: int) -> list[int]:
    return [PROMPTS[c] + GROW[c] * k for k in range(TURNS)]


def resent_tokens() -> int:
    return sum(sum(lengths(c)[:-1]) for c in range(len(PROMPTS)))



EXPECT = {"kind": "prefix_resend", "seam": "agent -> learner", "bytes_per_step": 6800 * 12}


@dataclasses.dataclass
class Turn:
    conv: int
    tokens: torch.Tensor
    logp: torch.Tensor


def agent(conn) -> None:
    flowmap.set_owner("agent")
    for step in range(STEPS):
        flowmap.step(step)
        rng = random.Random(step)
        for k in range(TURNS):
            order = list(range(len(PROMPTS)))
            rng.shuffle(order)
            for c in order:
                n = lengths(c)[k]
                conn.send(Turn(c, torch.randint(0, 30000, (1, n)), torch.randn(1, n)))
        conn.recv()
    conn.close()


def main() -> None:
    flowmap.set_owner("learner")
    a, b = mp.get_context("fork").Pipe()
    p = mp.get_context("fork").Process(target=agent, args=(b,))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(TURNS * len(PROMPTS)):
            a.recv()
        a.send("next")
    p.join()


if __name__ == "__main__":
    assert resent_tokens() == 6800, resent_tokens()
    main()
