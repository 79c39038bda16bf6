"""verl's batch layout: prompts padded on the left, responses on the right, one attention mask.

After generation, verl's `DataProto` holds `input_ids = cat(prompt, response)`: each prompt
left-padded to 256 positions, each response right-padded to 256, and one `attention_mask`
with zeros at both ends of every row, beside `position_ids`; the rollout worker sends it to
the actor worker (here an `mp.Queue`, torch shared memory). Written by an independent tester
(annotated only with owners and steps), made deterministic for the corpus.
By hand: prompts 32 + 8 i and responses 224 - 4 i tokens (i = 0..15) are 1,472 + 3,104 =
4,576 real of 8,192 positions; the three int64 [16, 512] leaves are 196,608 B a step, and
196,608 x 3,616 / 8,192 = 86,784 B/step of it is padding. Trailing zeros alone are 992
positions (23,808 B/step): a count of one end misses three quarters of it.
The fix: pack the sequences (`cu_seqlens`, `padding_packed_fixed.py`).
"""
import multiprocessing as mp

import torch

import flowmap

STEPS = 4
B, PROMPT, RESPONSE = 16, 256, 256
REAL = sum(32 + 8 * i for i in range(B)) + sum(224 - 4 * i for i in range(B))
EXPECT = {"kind": "padding", "seam": "rollout -> actor",
          "bytes_per_step": 3 * B * (PROMPT + RESPONSE) * 8 * (B * (PROMPT + RESPONSE) - REAL)
          // (B * (PROMPT + RESPONSE))}


def batch() -> dict:
    ids = torch.zeros(B, PROMPT + RESPONSE, dtype=torch.long)
    mask = torch.zeros(B, PROMPT + RESPONSE, dtype=torch.long)
    for i in range(B):
        p, r = 32 + 8 * i, 224 - 4 * i
        ids[i, PROMPT - p:PROMPT + r] = torch.randint(1, 32000, (p + r,))
        mask[i, PROMPT - p:PROMPT + r] = 1
    positions = torch.clamp(torch.cumsum(mask, -1) - 1, min=0)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions}


def actor(q, done) -> None:
    flowmap.set_owner("actor")
    for step in range(STEPS):
        flowmap.step(step)
        got = q.get()
        got["attention_mask"].sum()
    done.set()


def main() -> None:
    ctx = mp.get_context("spawn")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=actor, args=(q, done))
    p.start()
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        q.put(batch())
    done.wait()
    p.join()


if __name__ == "__main__":
    main()
