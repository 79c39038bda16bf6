"""Weight sync as one `(name, flat array)` per parameter over a `multiprocessing.Pipe`.

A learner that flattens each parameter (`p.detach().flatten().numpy()`, as a
hand-rolled NCCL-free sync does to send 1-D buffers) and sends it on its own:
every message is one leaf of one dimension, so only the lengths tell a model's
pieces. 8 blocks of a weight, a bias and a norm: 24 messages a step where one
bucket would do. By hand: 23 x 65,536 = 1,507,328 B/step.
"""
import multiprocessing as mp

import torch

import flowmap

BLOCKS, HIDDEN, STEPS = 8, 40, 4
EXPECT = {"kind": "chatty", "seam": "learner -> rollout", "bytes_per_step": 23 * 65536}


def rollout(conn, n: int) -> None:
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(n):
            conn.recv()


def main() -> None:
    flowmap.set_owner("learner")
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(HIDDEN, HIDDEN),
                                                      torch.nn.LayerNorm(HIDDEN, bias=False))
                                  for _ in range(BLOCKS)])
    params = list(model.named_parameters())
    here, there = mp.get_context("fork").Pipe()
    p = mp.get_context("fork").Process(target=rollout, args=(there, len(params)))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        with torch.no_grad():
            for _, w in params:
                w.add_(0.01)
        for name, w in params:
            here.send((name, w.detach().flatten().numpy()))
    p.join()


if __name__ == "__main__":
    main()
