"""Fixed round-robin conversations with a long system prompt, [1, L] tensors (mp.Queue).

6 conversations, prompt 600 + 11 i tokens, each turn adds 48 tokens, 4 turns a step;
`{"input_ids": int32 [1, L], "logprobs": float32 [1, L]}`: 8 B a token.
By hand: per conversation turns 0..2 resent: 3 x (600 + 11 i) + 48 x 3 = ... x 8 B.
"""
import multiprocessing as mp

import torch

import flowmap

STEPS = 3
K, TURNS, GROW = 6, 4, 48
EXPECT = {"kind": "prefix_resend", "seam": "env -> learner",
          "bytes_per_step": sum(3 * (600 + 11 * i) + GROW * 3 for i in range(K)) * 8}


def env(q, done) -> None:
    flowmap.set_owner("env")
    for step in range(STEPS):
        flowmap.step(step)
        for t in range(TURNS):
            for i in range(K):
                n = 600 + 11 * i + GROW * t
                q.put({"input_ids": torch.randint(0, 30000, (1, n), dtype=torch.int32),
                       "logprobs": torch.randn(1, n)})
    done.wait()


def main() -> None:
    flowmap.set_owner("learner")
    ctx = mp.get_context("fork")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=env, args=(q, done))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(TURNS * K):
            q.get()
    done.set()
    p.join()


if __name__ == "__main__":
    main()
