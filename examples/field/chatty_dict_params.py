"""Weight sync as one `{name: tensor}` message per parameter (mp.Queue, torch shared memory).

18 parameters a step (embedding, 4 blocks of q/k/v/o... shapes differ). By hand:
17 x 65,536 = 1,114,112 B/step.
"""
import multiprocessing as mp

import torch

import flowmap

STEPS = 4
EXPECT = {"kind": "chatty", "seam": "trainer -> sampler", "bytes_per_step": 1114112}


def params() -> dict:
    out = {"embed": torch.randn(256, 32)}
    for i in range(4):
        out[f"b{i}.qkv"] = torch.randn(96, 32)
        out[f"b{i}.o"] = torch.randn(32, 32)
        out[f"b{i}.ln"] = torch.ones(32)
        out[f"b{i}.mlp"] = torch.randn(128, 32)
    out["head"] = torch.randn(32, 256)
    return out


def sampler(q, n, done) -> None:
    flowmap.set_owner("sampler")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(n):
            q.get()
    done.set()


def main() -> None:
    flowmap.set_owner("trainer")
    state = params()
    ctx = mp.get_context("fork")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=sampler, args=(q, len(state), done))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for name, t in state.items():
            q.put({name: t.clone()})
    done.wait()
    p.join()


if __name__ == "__main__":
    main()
