"""Right-padded rollouts as numpy arrays with a bool validity array (PUSH -> PULL, pickle).

`{"ids": int32 [16, 512], "valid": bool [16, 512], "logp": float32 [16, 512]}`, padded
to a fixed 512. By hand: lengths 64 + 20 i (i = 0..15) = 3,424 real of 8,192 positions;
73,728 B a message, 2 a step: 2 x 73,728 x 4,768 / 8,192 = 85,824 B/step.
"""
import multiprocessing as mp
import tempfile

import numpy as np
import zmq

import flowmap

STEPS = 4
PER_STEP = 2
B, T = 16, 512
EXPECT = {"kind": "padding", "seam": "sampler -> trainer", "bytes_per_step": 85824}


def batch(rng) -> dict:
    ids = np.zeros((B, T), np.int32)
    valid = np.zeros((B, T), bool)
    logp = np.zeros((B, T), np.float32)
    for i in range(B):
        n = 64 + 20 * i
        ids[i, :n] = rng.integers(1, 32000, n)
        valid[i, :n] = True
        logp[i, :n] = -rng.random(n)
    return {"ids": ids, "valid": valid, "logp": logp}


def sampler(addr: str) -> None:
    flowmap.set_owner("sampler")
    s = zmq.Context().socket(zmq.PUSH)
    s.connect(addr)
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            s.send_pyobj(batch(rng))
    s.close(linger=-1)


def main() -> None:
    flowmap.set_owner("trainer")
    addr = f"ipc://{tempfile.mkdtemp()}/sampler"
    p = mp.get_context("fork").Process(target=sampler, args=(addr,))
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
