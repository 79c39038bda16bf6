"""An OpenAI-style server returns the conversation's token ids and logprobs as Python lists,
whole, every turn (mp.SimpleQueue, a tuple per message).

Five conversations a step; each has its own number of turns (3..5) and they finish at
different times, so the interleaving is not a fixed round. A message is
`(conv_id, token_ids: list[int], logprobs: list[float])`; flowmap counts a Python number as
8 B, so a token is 16 B. By hand the resent tokens per step are every message's length but
the last of its conversation (see `resent_tokens()`), x 16 B.
"""
import multiprocessing as mp
import random

import flowmap

STEPS = 4
PROMPTS = [30, 45, 60, 38, 52]
GROW = [40, 36, 48, 44, 32]
TURNS = [4, 5, 3, 5, 4]


def lengths(c: int) -> list[int]:
    return [PROMPTS[c] + GROW[c] * k for k in range(TURNS[c])]


def resent_tokens() -> int:
    return sum(sum(lengths(c)[:-1]) for c in range(len(PROMPTS)))


EXPECT = {"kind": "prefix_resend", "seam": "server -> collector", "bytes_per_step": 1442 * 16}


def server(q) -> None:
    flowmap.set_owner("server")
    for step in range(STEPS):
        flowmap.step(step)
        rng = random.Random(step)
        turn = [0] * len(PROMPTS)
        live = list(range(len(PROMPTS)))
        while live:
            c = rng.choice(live)
            n = lengths(c)[turn[c]]
            q.put((f"conv-{step}-{c}", [rng.randrange(32000) for _ in range(n)],
                   [-rng.random() for _ in range(n)]))
            turn[c] += 1
            if turn[c] == TURNS[c]:
                live.remove(c)
        q.put(None)


def main() -> None:
    flowmap.set_owner("collector")
    q = mp.get_context("fork").SimpleQueue()
    p = mp.get_context("fork").Process(target=server, args=(q,))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        while q.get() is not None:
            pass
    p.join()


if __name__ == "__main__":
    assert resent_tokens() == 1442, resent_tokens()
    main()
