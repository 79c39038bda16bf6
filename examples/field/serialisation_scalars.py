"""A reward worker returns per-token rewards as a list of 0-d tensors (PUSH -> PULL, pickle).

Each message is `{"rewards": [tensor(r) for r in ...], "seq": int}` with 256 scalars:
own bytes 256 x 4 B (+ 8 B for the int); each 0-d tensor pickles with its storage header.
By hand (pickle.dumps of one message, as send_pyobj does): 72,082 B a message, 8 a step,
at stake (WIRE - 1,032) x 8.
"""
import multiprocessing as mp
import tempfile

import torch
import zmq

import flowmap

STEPS = 4
PER_STEP = 8
N = 256
EXPECT = {"kind": "serialisation", "seam": "reward -> trainer", "bytes_per_step": 568400}


def reward(addr: str) -> None:
    flowmap.set_owner("reward")
    s = zmq.Context().socket(zmq.PUSH)
    s.connect(addr)
    for step in range(STEPS):
        flowmap.step(step)
        for i in range(PER_STEP):
            s.send_pyobj({"rewards": [torch.tensor(float(j) / N) for j in range(N)], "seq": i})
    s.close(linger=-1)


def main() -> None:
    flowmap.set_owner("trainer")
    addr = f"ipc://{tempfile.mkdtemp()}/reward"
    p = mp.get_context("fork").Process(target=reward, args=(addr,))
    p.start()
    s = zmq.Context().socket(zmq.PULL)
    s.bind(addr)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            s.recv_pyobj()
    p.join()


if __name__ == "__main__":
    main()
