"""A replay buffer that takes a defensive copy of each rollout batch and pushes the copy on.

The shape of a buffer process between rollout workers and a learner, over ZMQ: it loads
each batch with `recv_pyobj`, takes `copy.deepcopy` of it (so that nothing the sender
does later can change what it holds) and sends the copy with `send_pyobj`, unchanged.
The copy's tensors are new storages: the data is the rollout's all the same, found by
the content of the bytes ZMQ already carries (`flowmap/integrations/transports/relay_bytes.py`).
The fix: the rollout pushes to the learner, and the buffer keeps the ids it needs
(`relay_zmq_deepcopy_fixed.py` is the look-alike that must stay quiet: a buffer that
sends a batch of its own, of the same shapes).

    flowmap trace examples/field/relay_zmq_deepcopy.py && flowmap report
"""

from __future__ import annotations

import copy
import multiprocessing as mp

import torch
import zmq

import flowmap

STEPS, PER_STEP, B, T = 4, 2, 16, 256
# each batch: tokens int64 [16, 256] 32 KiB + logprobs and values float32 [16, 256] 16 KiB each
EXPECT = {"kind": "pass_through", "seam": "rollout -> buffer",
          "bytes_per_step": PER_STEP * B * T * (8 + 4 + 4)}


def rollout(inbox: str) -> None:
    flowmap.set_owner("rollout")
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(inbox)
    g = torch.Generator().manual_seed(0)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            push.send_pyobj({"step": step, "tokens": torch.randint(0, 32000, (B, T), generator=g),
                             "logprobs": -torch.rand(B, T, generator=g),
                             "values": torch.randn(B, T, generator=g)})
    push.send_pyobj(None)
    push.close(linger=3000)
    ctx.term()


def learner(outbox: str) -> None:
    flowmap.set_owner("learner")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.connect(outbox)
    while (batch := pull.recv_pyobj()) is not None:
        flowmap.step(batch["step"])
        float((batch["values"] - batch["logprobs"]).mean())
    pull.close()
    ctx.term()


def buffer(pull: zmq.Socket, push: zmq.Socket, compute: bool) -> None:
    with flowmap.owner("buffer"):
        while (batch := pull.recv_pyobj()) is not None:
            flowmap.step(batch["step"])
            kept = copy.deepcopy(batch)
            if compute:  # a batch of its own, of the same shapes: shaped for the learner
                kept["tokens"] = (kept["tokens"] + 1) % 32000
                kept["logprobs"] = kept["logprobs"] * 0.9
                kept["values"] = torch.tanh(kept["values"] + kept["logprobs"])
            push.send_pyobj(kept)
        push.send_pyobj(None)


def main(compute: bool = False) -> None:
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    inbox = f"tcp://127.0.0.1:{pull.bind_to_random_port('tcp://127.0.0.1')}"
    outbox = f"tcp://127.0.0.1:{push.bind_to_random_port('tcp://127.0.0.1')}"
    procs = [mp.Process(target=rollout, args=(inbox,)), mp.Process(target=learner, args=(outbox,))]
    for p in procs:
        p.start()
    buffer(pull, push, compute)
    for p in procs:
        p.join()
    pull.close()
    push.close(linger=2000)
    ctx.term()


if __name__ == "__main__":
    main()
