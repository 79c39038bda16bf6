"""Left-padded prompts with their attention as a tuple (mp.Queue, torch, shared memory).

A tokenizer-style collator pads 8 prompts on the left to 256 positions (pad id 2) and sends
`(input_ids int64 [8, 256], attention int64 [8, 256])`: no leaf is named after a mask.
By hand: lengths 40 + 10 i (i = 0..7) = 600 real of 2,048 positions; 32,768 B a message,
2 a step: 2 x 32,768 x 1,448 / 2,048 = 46,336 B/step.
An integer or float mask nobody named is read only under `flowmap trace --values`.
"""
import multiprocessing as mp

import torch

import flowmap

STEPS = 4
PER_STEP = 2
B, T = 8, 256
EXPECT = {"kind": "padding", "seam": "collator -> policy", "bytes_per_step": 46336,
          "values": True}


def batch() -> tuple:
    ids = torch.full((B, T), 2, dtype=torch.int64)
    att = torch.zeros((B, T), dtype=torch.int64)
    for i in range(B):
        n = 40 + 10 * i
        ids[i, T - n:] = torch.randint(3, 32000, (n,))
        att[i, T - n:] = 1
    return ids, att


def collator(q, done) -> None:
    flowmap.set_owner("collator")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            q.put(batch())
    done.wait()


def main() -> None:
    flowmap.set_owner("policy")
    ctx = mp.get_context("fork")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=collator, args=(q, done))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            ids, att = q.get()
            del ids, att
    done.set()
    p.join()


if __name__ == "__main__":
    main()
