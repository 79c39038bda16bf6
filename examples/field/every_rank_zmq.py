"""The full batch pushed to every rank's ZMQ socket with `send_pyobj`, each rank keeping a part.

The shape of a rollout server fanning results out to trainer ranks over ZMQ (SkyRL's and
AReaL's ZMQ data planes): one PUSH socket per rank, the same pickled batch down each, and
each rank keeps its rows. One process, an owner per thread (`flowmap.owner`), steps by
`flowmap.step` in the server's thread (a step is the process's). Fix: push each rank its rows only.

    flowmap trace examples/field/every_rank_zmq.py && flowmap report
"""

from __future__ import annotations

import threading

import torch
import zmq

import flowmap

RANKS, BATCH, TOKENS, STEPS = 3, 24, 1024, 3
BATCH_BYTES = BATCH * TOKENS * (4 + 4)  # int32 ids + float32 rewards
EXPECT = {"kind": "duplicate", "seam": "server -> rank0",
          "bytes_per_step": (RANKS - 1) * BATCH_BYTES}


def rank(r: int, ctx: zmq.Context, addr: str) -> None:
    with flowmap.owner(f"rank{r}"):
        pull = ctx.socket(zmq.PULL)
        pull.connect(addr)
        for _ in range(STEPS):  # the step is the process's: the server's thread sets it
            batch = pull.recv_pyobj()
            assert batch["ids"][r::RANKS].shape == (BATCH // RANKS, TOKENS)
        pull.close()


def main() -> None:
    ctx = zmq.Context()
    with flowmap.owner("server"):
        pushes = [ctx.socket(zmq.PUSH) for _ in range(RANKS)]
        ports = [s.bind_to_random_port("tcp://127.0.0.1") for s in pushes]
        threads = [threading.Thread(target=rank, args=(r, ctx, f"tcp://127.0.0.1:{p}"))
                   for r, p in enumerate(ports)]
        for t in threads:
            t.start()
        for step in range(STEPS):
            flowmap.step(step)
            batch = {"ids": torch.randint(0, 32000, (BATCH, TOKENS), dtype=torch.int32),
                     "rewards": torch.randn(BATCH, TOKENS)}
            for s in pushes:  # the bug: the whole batch to every rank
                s.send_pyobj(batch)
        for t in threads:
            t.join()
        for s in pushes:
            s.close()
    ctx.term()


if __name__ == "__main__":
    main()
