"""Weight sync as one ZMQ message per parameter (name, tensor).

A trainer that pushes `(name, tensor)` per parameter to a rollout engine over
ZMQ (`send_pyobj`), as HTTP/ZMQ weight-update endpoints do when they are called
once per tensor (TRL #5249's per-parameter `update_named_param`).

    flowmap trace examples/field/chatty_zmq.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch
import zmq

import flowmap

LAYERS, HIDDEN, STEPS = 12, 32, 3
PARAMS = LAYERS * 3  # weight, bias, norm per layer
EXPECT = {"kind": "chatty", "seam": "trainer -> engine",
          "bytes_per_step": (PARAMS - 1) * 64 * 1024}


def engine(port: int) -> None:
    flowmap.set_owner("engine")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.connect(f"tcp://127.0.0.1:{port}")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PARAMS):
            pull.recv_pyobj()
    pull.close()
    ctx.term()


def main() -> None:
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    p = mp.get_context("spawn").Process(target=engine, args=(port,))
    p.start()
    flowmap.set_owner("trainer")
    params = []
    for i in range(LAYERS):
        params += [(f"h.{i}.weight", torch.randn(HIDDEN, HIDDEN)),
                   (f"h.{i}.bias", torch.zeros(HIDDEN)), (f"h.{i}.ln", torch.ones(HIDDEN))]
    for step in range(STEPS):
        flowmap.step(step)
        for name, value in params:
            push.send_pyobj((name, value))
    p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
