"""The whole batch published to every worker (ZMQ PUB/SUB); each keeps a third of its rows.

A dispatcher publishes each step's batch, `obs float32 [96, 256]`, with `send_pyobj` on
one PUB socket; three worker processes subscribe, each keeps rows `rank::3` and PUSHes
back its per-row scores `[32]`: the rows show each worker went on with its part. The fix
sends each worker its own rows (a PUSH per worker, `every_rank_fixed.py`'s shape).
By hand: three copies of 98,304 B reach the workers where one would do: 2 x 98,304 B/step.

    flowmap trace examples/field/every_rank_pubsub.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np
import zmq

import flowmap

STEPS, WORKERS, ROWS, WIDTH = 4, 3, 96, 256
EXPECT = {"kind": "duplicate", "seam": "dispatcher -> worker",
          "bytes_per_step": (WORKERS - 1) * ROWS * WIDTH * 4}


def worker(rank: int, pub_port: int, result_port: int, ready) -> None:  # type: ignore[no-untyped-def]
    flowmap.set_owner(f"worker/{rank}")
    ctx = zmq.Context()
    sub, push = ctx.socket(zmq.SUB), ctx.socket(zmq.PUSH)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"tcp://127.0.0.1:{pub_port}")
    push.connect(f"tcp://127.0.0.1:{result_port}")
    time.sleep(0.5)  # PUB/SUB: a subscriber joins before the first message or misses it
    ready.release()
    weights = np.linspace(-1, 1, WIDTH, dtype=np.float32)
    for step in range(STEPS):
        flowmap.step(step)
        batch = sub.recv_pyobj()
        mine = batch["obs"][rank::WORKERS]  # the bug: every worker got all the rows
        push.send_pyobj({"rank": rank, "scores": (mine @ weights).astype(np.float32)})
    sub.close()
    push.close(linger=5000)
    ctx.term()


def main() -> None:
    flowmap.set_owner("dispatcher")
    ctx = zmq.Context()
    pub, pull = ctx.socket(zmq.PUB), ctx.socket(zmq.PULL)
    pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
    result_port = pull.bind_to_random_port("tcp://127.0.0.1")
    spawn = mp.get_context("spawn")
    ready = spawn.Semaphore(0)
    workers = [spawn.Process(target=worker, args=(r, pub_port, result_port, ready))
               for r in range(WORKERS)]
    for p in workers:
        p.start()
    for _ in workers:
        ready.acquire(timeout=60)
    time.sleep(0.3)
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        pub.send_pyobj({"step": step, "obs": rng.standard_normal((ROWS, WIDTH), dtype=np.float32)})
        for _ in workers:
            pull.recv_pyobj()
    for p in workers:
        p.join()
    pub.close()
    pull.close()
    ctx.term()


if __name__ == "__main__":
    main()
