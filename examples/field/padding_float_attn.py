"""A TensorDict-like nested batch with a float 0/1 attention (mp.Pipe, torch shared memory).

`{"batch": {"tokens": int64 [16, 384], "attn": float32 [16, 384], "old_logp": float32
[16, 384]}, "meta": {"step": int}}`, right-padded to 384. By hand: lengths 100 + 12 i
(i = 0..15) = 3,040 real of 6,144 positions; 16 x 384 x 16 B = 98,304 B a message, one a
step: 98,304 x 3,104 / 6,144 = 49,664 B/step.
An integer or float mask nobody named is read only under `flowmap trace --values`.
"""
import multiprocessing as mp

import torch

import flowmap

STEPS = 4
B, T = 16, 384
EXPECT = {"kind": "padding", "seam": "rollout -> actor", "bytes_per_step": 49664,
          "values": True}


def batch(step: int) -> dict:
    tokens = torch.zeros((B, T), dtype=torch.int64)
    attn = torch.zeros((B, T))
    logp = torch.zeros((B, T))
    for i in range(B):
        n = 100 + 12 * i
        tokens[i, :n] = torch.randint(1, 50000, (n,))
        attn[i, :n] = 1.0
        logp[i, :n] = -torch.rand(n)
    return {"batch": {"tokens": tokens, "attn": attn, "old_logp": logp}, "meta": {"step": step}}


def rollout(conn) -> None:
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        conn.send(batch(step))
        conn.recv()


def main() -> None:
    flowmap.set_owner("actor")
    a, b = mp.get_context("fork").Pipe()
    p = mp.get_context("fork").Process(target=rollout, args=(b,))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        a.recv()
        a.send(step)
    p.join()


if __name__ == "__main__":
    main()
