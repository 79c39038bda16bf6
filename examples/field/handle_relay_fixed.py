"""Control: the fix for a driver funnel, a handle relayed through the driver.
The rollout writes each batch into a named `multiprocessing.shared_memory` slot and sends
only a small handle (slot name, shape, dtype) through the driver to the trainer, which
opens the slot and returns it to the free list. The bulk never crosses a traced seam;
the 80 B handle is a control message, no finding (less than 256 B a step).

    flowmap trace examples/field/handle_relay_fixed.py && flowmap report
"""
import multiprocessing as mp
from multiprocessing import shared_memory

import numpy as np
import torch

import flowmap

EXPECT = None  # the fix applied: no finding

STEPS, B, T, SLOTS = 6, 64, 256, 2
SHAPE = (B, T)


def rollout(cmd_q, handle_q, free_q, names):
    with flowmap.owner("rollout"):
        shms = {n: shared_memory.SharedMemory(name=n) for n in names}
        rng = np.random.default_rng(1)
        while True:
            step = cmd_q.get()
            if step is None:
                break
            flowmap.step(step)
            slot = free_q.get()
            buf = np.ndarray((2,) + SHAPE, dtype=np.float32, buffer=shms[slot].buf)
            buf[0] = rng.integers(0, 30000, SHAPE)      # token ids (exact in fp32)
            buf[1] = -rng.random(SHAPE, dtype=np.float32)  # logprobs
            handle_q.put({"step": step, "slot": slot, "shape": SHAPE, "dtype": "float32"})
        for s in shms.values():
            s.close()


def trainer(handle_q, free_q, ack_q, names):
    with flowmap.owner("trainer"):
        shms = {n: shared_memory.SharedMemory(name=n) for n in names}
        w = torch.zeros(1, requires_grad=True)
        opt = torch.optim.Adam([w], lr=0.1)
        while True:
            h = handle_q.get()
            if h is None:
                break
            flowmap.step(h["step"])
            arr = np.ndarray((2,) + tuple(h["shape"]), dtype=np.float32, buffer=shms[h["slot"]].buf)
            logp = torch.from_numpy(arr[1].copy())
            loss = ((w - logp.mean()) ** 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
            free_q.put(h["slot"])
            ack_q.put(h["step"])
        for s in shms.values():
            s.close()


def main():
    nbytes = 2 * B * T * 4
    shms = [shared_memory.SharedMemory(create=True, size=nbytes) for _ in range(SLOTS)]
    names = [s.name for s in shms]
    cmd_q, rq, tq, free_q, ack_q = mp.Queue(), mp.Queue(), mp.Queue(), mp.Queue(), mp.Queue()
    for n in names:
        free_q.put(n)
    ps = [mp.Process(target=rollout, args=(cmd_q, rq, free_q, names), name="rollout"),
          mp.Process(target=trainer, args=(tq, free_q, ack_q, names), name="trainer")]
    for p in ps:
        p.start()
    with flowmap.owner("driver"):
        for step in range(STEPS):
            flowmap.step(step)
            cmd_q.put(step)
            handle = rq.get()           # a few dozen bytes
            tq.put(handle)              # forwarded: it is only a handle
            assert ack_q.get() == step
        cmd_q.put(None)
        tq.put(None)
    for p in ps:
        p.join()
    for s in shms:
        s.close()
        s.unlink()
    print("ok")


if __name__ == "__main__":
    main()
