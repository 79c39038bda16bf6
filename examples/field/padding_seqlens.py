"""Rows padded with a non-zero pad id, real lengths in a tensor beside them (mp.Pipe, torch).

`{"input_ids": int32 [12, 300], "seq_lens": int64 [12]}`: pad id 151,643 (an EOS), so no
zero tails; only the lengths say what is real (`flowmap trace --values`). By hand:
lengths 80 + 15 i = 1,950 real of 3,600 positions; input_ids 14,400 B a message, 2 a step:
2 x 14,400 x 1,650 / 3,600 = 13,200 B/step.
"""
import multiprocessing as mp

import torch

import flowmap

STEPS = 4
PER_STEP = 2
B, T = 12, 300
PAD = 151_643
EXPECT = {"kind": "padding", "seam": "rollout -> trainer", "bytes_per_step": 13200,
          "values": True}


def batch() -> dict:
    ids = torch.full((B, T), PAD, dtype=torch.int32)
    lens = torch.tensor([80 + 15 * i for i in range(B)])
    for i in range(B):
        ids[i, : lens[i]] = torch.randint(0, 150000, (int(lens[i]),), dtype=torch.int32)
    return {"input_ids": ids, "seq_lens": lens}


def rollout(conn) -> None:
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            conn.send(batch())
        conn.recv()


def main() -> None:
    flowmap.set_owner("trainer")
    a, b = mp.get_context("fork").Pipe()
    p = mp.get_context("fork").Process(target=rollout, args=(b,))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            a.recv()
        a.send(step)
    p.join()


if __name__ == "__main__":
    main()
