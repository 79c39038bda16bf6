"""Control: one message per trajectory, 12 a step, random lengths (PUSH -> PULL, numpy)."""
import multiprocessing as mp
import tempfile

import numpy as np
import zmq

import flowmap

EXPECT = None
STEPS = 4
PER_STEP = 12


def actor(addr: str) -> None:
    flowmap.set_owner("actor")
    s = zmq.Context().socket(zmq.PUSH)
    s.connect(addr)
    rng = np.random.default_rng(1)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            n = int(rng.integers(40, 600))
            s.send_pyobj({"tokens": rng.integers(0, 30000, n).astype(np.int32),
                          "logp": rng.random(n, dtype=np.float32), "reward": float(rng.random())})
    s.close(linger=-1)


def main() -> None:
    flowmap.set_owner("learner")
    addr = f"ipc://{tempfile.mkdtemp()}/traj"
    p = mp.get_context("fork").Process(target=actor, args=(addr,))
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
