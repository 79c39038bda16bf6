"""Weight sync as one raw ZMQ multipart message per parameter: [name, bytes].

A trainer that serializes each parameter itself (`tensor.numpy().tobytes()`) and sends
`[name, header, data]` frames per parameter, as hand-rolled weight-update endpoints do.
By hand: 36 messages a step where one bucket would do: 35 x 65,536 B/step.
"""
from __future__ import annotations

import json
import multiprocessing as mp

import torch
import zmq

import flowmap

LAYERS, HIDDEN, STEPS = 12, 32, 3
PARAMS = LAYERS * 3
EXPECT = {"kind": "chatty", "seam": "trainer -> engine", "bytes_per_step": (PARAMS - 1) * 64 * 1024}


def engine(port: int) -> None:
    flowmap.set_owner("engine")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.connect(f"tcp://127.0.0.1:{port}")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PARAMS):
            name, header, data = pull.recv_multipart()
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
            header = json.dumps({"shape": list(value.shape), "dtype": "float32"}).encode()
            push.send_multipart([name.encode(), header, value.numpy().tobytes()])
    p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
