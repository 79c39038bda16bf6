"""Log-probs sent as JSON text over a ZMQ socket: each float32 becomes ~20 characters.

A pattern of HTTP/ZMQ rollout servers (sglang's `/generate` JSON, OpenRLHF's
remote reward and vLLM clients): the server turns its tensor into a Python list
(`.tolist()`) and the socket sends it as JSON. Each 4-byte float32 crosses as
its decimal text; flowmap compares the bytes that crossed with the payload's
own and prices the difference.

    flowmap trace examples/field/serialisation_json.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch
import zmq

import flowmap

SAMPLES, TOKENS, STEPS = 8, 512, 3
# per float: "-6.2345678806304932, " is ~20 characters on the wire for the 4 bytes of the
# float32 it was
EXPECT = {"kind": "serialisation", "seam": "server -> trainer",
          "bytes_per_step": SAMPLES * TOKENS * (20 - 4)}


def server(port: int) -> None:
    flowmap.set_owner("server")
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port}")
    torch.manual_seed(0)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(SAMPLES):
            logprobs = torch.randn(TOKENS).log_softmax(0)
            push.send_json({"logprobs": logprobs.tolist()})
    push.close()
    ctx.term()


def main() -> None:
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    p = mp.get_context("spawn").Process(target=server, args=(port,))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(SAMPLES):
            pull.recv_json()
    p.join()
    pull.close()
    ctx.term()


if __name__ == "__main__":
    main()
