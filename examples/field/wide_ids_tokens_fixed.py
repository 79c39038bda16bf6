"""Control for wide ids: the same 32k-vocabulary token ids sent as int32 (mp.Queue, torch)."""
import multiprocessing as mp

import torch

import flowmap

STEPS = 4
EXPECT = None


def generator(q, done) -> None:
    flowmap.set_owner("generator")
    for step in range(STEPS):
        flowmap.step(step)
        q.put({"input_ids": torch.randint(0, 32000, (16, 256), dtype=torch.int32),
               "rewards": torch.rand(16)})
    done.wait()


def main() -> None:
    flowmap.set_owner("trainer")
    ctx = mp.get_context("fork")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=generator, args=(q, done))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        q.get()
    done.set()
    p.join()


if __name__ == "__main__":
    main()
