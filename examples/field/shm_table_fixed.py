"""Control: a read-only embedding table shared once through shared memory, its rows handed
to two workers every step (mp.Queue of views; torch shares the storage, handles cross)."""
import multiprocessing as mp

import torch

import flowmap

EXPECT = None
STEPS = 4


def worker(q, done, rank) -> None:
    flowmap.set_owner(f"worker/{rank}")
    for step in range(STEPS):
        flowmap.step(step)
        q.get()
    done.wait()


def main() -> None:
    flowmap.set_owner("driver")
    table = torch.randn(4096, 256)
    table.share_memory_()
    ctx = mp.get_context("fork")
    qs = [ctx.Queue() for _ in range(2)]
    done = ctx.Event()
    ps = [ctx.Process(target=worker, args=(q, done, r)) for r, q in enumerate(qs)]
    for p in ps:
        p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for r, q in enumerate(qs):
            q.put({"rows": table[r * 2048:(r + 1) * 2048], "step": step})
    done.set()
    for p in ps:
        p.join()


if __name__ == "__main__":
    main()
