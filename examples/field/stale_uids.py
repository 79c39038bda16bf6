"""Stale rollouts dropped by their own uid strings, never tagged on a message (PUSH -> PULL).

Each message is `{"uid": uuid4 str, "version": int, "obs": float32 [64, 16], "act": int32
[64]}`; the learner pulls 8 a step and drops the 3 that are too old with
`flowmap.drop([uid, ...], "stale")`. By hand (pickled, as send_pyobj sends it): about
4,600 B a message, 3 a step = ~13,800 B/step.
"""
import multiprocessing as mp
import tempfile
import uuid

import numpy as np
import zmq

import flowmap

STEPS = 4
PER_STEP = 8
EXPECT = {"kind": "dropped", "seam": "worker -> learner", "bytes_per_step": 13800}


def worker(addr: str) -> None:
    flowmap.set_owner("worker")
    s = zmq.Context().socket(zmq.PUSH)
    s.connect(addr)
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        for i in range(PER_STEP):
            s.send_pyobj({"uid": str(uuid.uuid4()), "version": step - (3 if i % 3 == 0 else 0),
                          "obs": rng.random((64, 16), dtype=np.float32),
                          "act": rng.integers(0, 4, 64).astype(np.int32)})
    s.close(linger=-1)


def main() -> None:
    flowmap.set_owner("learner")
    addr = f"ipc://{tempfile.mkdtemp()}/rollouts"
    p = mp.get_context("fork").Process(target=worker, args=(addr,))
    p.start()
    s = zmq.Context().socket(zmq.PULL)
    s.bind(addr)
    for step in range(STEPS):
        flowmap.step(step)
        msgs = [s.recv_pyobj() for _ in range(PER_STEP)]
        old = [m["uid"] for m in msgs if m["version"] < step - 1]
        flowmap.drop(old, "stale")
    p.join()


if __name__ == "__main__":
    main()
