"""Control for padding: a packed batch `[1, N]` with cu_seqlens and a loss weight that is 0
on each sample's prompt tokens (mp.Pipe, a tuple, torch). Nothing here is padding."""
import multiprocessing as mp

import torch

import flowmap

EXPECT = None
STEPS = 4
PROMPTS = [30, 52, 41, 66, 25, 38]
RESPONSES = [90, 40, 120, 75, 60, 101]


def batch() -> tuple:
    lens = [p + r for p, r in zip(PROMPTS, RESPONSES)]
    n = sum(lens)
    ids = torch.randint(1, 32000, (1, n), dtype=torch.int32)
    weight = torch.zeros((1, n))
    cu = torch.zeros(len(lens) + 1, dtype=torch.int32)
    at = 0
    for i, (p, r) in enumerate(zip(PROMPTS, RESPONSES)):
        weight[0, at + p: at + p + r] = 1.0
        at += p + r
        cu[i + 1] = at
    return ids, weight, cu


def packer(conn) -> None:
    flowmap.set_owner("packer")
    for step in range(STEPS):
        flowmap.step(step)
        conn.send(batch())
        conn.recv()


def main() -> None:
    flowmap.set_owner("trainer")
    a, b = mp.get_context("fork").Pipe()
    p = mp.get_context("fork").Process(target=packer, args=(b,))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        a.recv()
        a.send(step)
    p.join()


if __name__ == "__main__":
    main()
