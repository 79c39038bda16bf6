"""Control for duplicate: weights published to every rollout worker (ZMQ PUB/SUB), used whole.

A trainer publishes its weights, `float32 [128, 256]`, once a step on a PUB socket; two
rollout workers subscribe and each uses the whole of it (a forward pass over its own
prompts), then PUSHes back a small result. One message, delivered by the socket to each
subscriber, of data each needs whole: nothing to slice or send once more cheaply.
"""

from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np
import zmq

import flowmap

EXPECT = None
STEPS, WORKERS = 4, 2


def rollout(rank: int, pub_port: int, result_port: int, ready) -> None:  # type: ignore[no-untyped-def]
    flowmap.set_owner(f"rollout/{rank}")
    ctx = zmq.Context()
    sub, push = ctx.socket(zmq.SUB), ctx.socket(zmq.PUSH)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"tcp://127.0.0.1:{pub_port}")
    push.connect(f"tcp://127.0.0.1:{result_port}")
    time.sleep(0.5)  # PUB/SUB: a subscriber joins before the first message or misses it
    ready.release()
    prompts = np.random.default_rng(rank).standard_normal((16, 128), dtype=np.float32)
    for step in range(STEPS):
        flowmap.step(step)
        weights = sub.recv_pyobj()["weights"]
        logits = prompts @ weights  # every row of the weights is used
        push.send_pyobj({"rank": rank, "reward": float(logits.mean())})
    sub.close()
    push.close(linger=5000)
    ctx.term()


def main() -> None:
    flowmap.set_owner("trainer")
    ctx = zmq.Context()
    pub, pull = ctx.socket(zmq.PUB), ctx.socket(zmq.PULL)
    pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
    result_port = pull.bind_to_random_port("tcp://127.0.0.1")
    spawn = mp.get_context("spawn")
    ready = spawn.Semaphore(0)
    workers = [spawn.Process(target=rollout, args=(r, pub_port, result_port, ready))
               for r in range(WORKERS)]
    for p in workers:
        p.start()
    for _ in workers:
        ready.acquire(timeout=60)
    time.sleep(0.3)
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        pub.send_pyobj({"step": step, "weights": rng.standard_normal((128, 256), dtype=np.float32)})
        for _ in workers:
            pull.recv_pyobj()
    for p in workers:
        p.join()
    pub.close()
    pull.close()
    ctx.term()


if __name__ == "__main__":
    main()
