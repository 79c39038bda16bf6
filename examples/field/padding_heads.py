"""Left-padded token rows with no mask at all (DEALER -> ROUTER, a dataclass, torch).

`Batch(tokens int32 [8, 200], logp float32 [8, 200])`, each row right-aligned with zeros
before it (pad id 0); only `flowmap trace --values` can see it. By hand: lengths 50 + 15 i
= 820 real of 1,600 positions; 12,800 B a message, 2 a step:
2 x 12,800 x 780 / 1,600 = 12,480 B/step.
"""
import dataclasses
import multiprocessing as mp
import tempfile

import torch
import zmq

import flowmap

STEPS = 4
PER_STEP = 2
B, T = 8, 200
EXPECT = {"kind": "padding", "seam": "engine -> learner", "bytes_per_step": 12480,
          "values": True}


@dataclasses.dataclass
class Batch:
    tokens: torch.Tensor
    logp: torch.Tensor


def batch() -> Batch:
    tokens = torch.zeros((B, T), dtype=torch.int32)
    logp = torch.zeros((B, T))
    for i in range(B):
        n = 50 + 15 * i
        tokens[i, T - n:] = torch.randint(1, 32000, (n,), dtype=torch.int32)
        logp[i, T - n:] = -torch.rand(n)
    return Batch(tokens, logp)


def engine(addr: str) -> None:
    flowmap.set_owner("engine")
    s = zmq.Context().socket(zmq.DEALER)
    s.connect(addr)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            s.send_pyobj(batch())
        s.recv()
    s.close()


def main() -> None:
    flowmap.set_owner("learner")
    addr = f"ipc://{tempfile.mkdtemp()}/engine"
    p = mp.get_context("fork").Process(target=engine, args=(addr,))
    p.start()
    r = zmq.Context().socket(zmq.ROUTER)
    r.bind(addr)
    for step in range(STEPS):
        flowmap.step(step)
        ident = None
        for _ in range(PER_STEP):
            ident, _ = r.recv_multipart()
        r.send_multipart([ident, b"ok"])
    p.join()


if __name__ == "__main__":
    main()
