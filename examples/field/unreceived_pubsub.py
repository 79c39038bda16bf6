"""Weights published every micro-step on a PUB socket whose subscriber keeps only the last.

The shape of a weight-sync channel with `zmq.CONFLATE` on the rollout side (a pattern of
ZMQ-based weight broadcasts in sglang/SkyRL-style setups): the trainer publishes a bucket of
weights after each of 4 micro-steps, the subscriber (conflated: it keeps one message) reads
once per step after they are all sent, and 3 of 4 buckets are dropped. One process, an owner
per thread (`flowmap.owner`), steps by `flowmap.step`. Fix: publish once per step.

    flowmap trace examples/field/unreceived_pubsub.py && flowmap report
"""

from __future__ import annotations

import threading
import time

import torch
import zmq

import flowmap

MICRO, STEPS, PARAMS = 4, 3, 256 * 1024  # float32: a 1 MiB bucket
BUCKET = PARAMS * 4
EXPECT = {"kind": "unreceived", "seam": "trainer -> (untraced)",
          "bytes_per_step": (MICRO - 1) * BUCKET}


def rollout(ctx: zmq.Context, addr: str, ready: threading.Event, sent: threading.Semaphore,
            got: threading.Semaphore) -> None:
    with flowmap.owner("rollout"):
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.CONFLATE, 1)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(addr)
        ready.set()
        for _ in range(STEPS):
            sent.acquire()
            time.sleep(0.2)  # let every bucket land: CONFLATE keeps the last
            weights = sub.recv()
            assert len(weights) == BUCKET
            got.release()
        sub.close()


def main() -> None:
    ctx = zmq.Context()
    with flowmap.owner("trainer"):
        pub = ctx.socket(zmq.PUB)
        port = pub.bind_to_random_port("tcp://127.0.0.1")
        ready, sent, got = threading.Event(), threading.Semaphore(0), threading.Semaphore(0)
        t = threading.Thread(target=rollout, args=(ctx, f"tcp://127.0.0.1:{port}", ready, sent, got))
        t.start()
        ready.wait()
        time.sleep(0.3)  # the subscription reaches the publisher
        for step in range(STEPS):
            flowmap.step(step)
            for _ in range(MICRO):  # the bug: a bucket per micro-step, the subscriber keeps one
                pub.send(torch.randn(PARAMS).numpy().tobytes())
            sent.release()
            got.acquire()
        t.join()
        pub.close(linger=0)
    ctx.term()


if __name__ == "__main__":
    main()
