"""Per-layer statistics as many small torch tensors, pickled onto a ZMQ PUB socket.

A trainer that publishes per-layer router statistics (or per-parameter norms)
to its rollout workers as a dict of tiny tensors through `send_pyobj`: torch
pickles each tensor with its storage record and metadata (~300 bytes) around
16 bytes of data.

    flowmap trace examples/field/serialisation_pubsub.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import time

import torch
import zmq

import flowmap

LAYERS, STEPS = 48, 3
OVERHEAD = 312  # bytes of pickle around each 16-byte tensor (pickle.dumps, by hand)
EXPECT = {"kind": "serialisation", "seam": "trainer -> rollout",
          "bytes_per_step": LAYERS * OVERHEAD}


def rollout(port: int, ready: mp.Event) -> None:  # type: ignore[valid-type]
    flowmap.set_owner("rollout")
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"tcp://127.0.0.1:{port}")
    time.sleep(0.3)  # PUB/SUB: a subscriber joins before the first message or misses it
    ready.set()
    for _ in range(STEPS):
        sub.recv_pyobj()
    sub.close()
    ctx.term()


def main() -> None:
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    mpc = mp.get_context("spawn")
    ready = mpc.Event()
    p = mpc.Process(target=rollout, args=(port, ready))
    p.start()
    ready.wait()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        pub.send_pyobj({f"layers.{i}.router_load": torch.rand(4) for i in range(LAYERS)})
    p.join()
    pub.close()
    ctx.term()


if __name__ == "__main__":
    main()
