"""Control for the scalar list: the rewards go as one float32 tensor (PUSH -> PULL, pickle)."""
import multiprocessing as mp
import tempfile

import torch
import zmq

import flowmap

STEPS = 4
PER_STEP = 8
N = 256
EXPECT = None


def reward(addr: str) -> None:
    flowmap.set_owner("reward")
    s = zmq.Context().socket(zmq.PUSH)
    s.connect(addr)
    for step in range(STEPS):
        flowmap.step(step)
        for i in range(PER_STEP):
            s.send_pyobj({"rewards": torch.arange(N, dtype=torch.float32) / N, "seq": i})
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
