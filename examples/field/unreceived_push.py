"""Per-group rewards pushed over ZMQ to a logger that reads one message a step.

The shape of a metrics side channel that falls behind (a reward logger fed per group but
reading once per step, OpenRLHF-style remote reward/log workers): the reward thread pushes
`GROUPS` messages a step on a PUSH socket, the logger's PULL takes one per step and stops at
the end; the rest wait in ZMQ's queues and are dropped at close. One process, an owner per
thread (`flowmap.owner`), steps by `flowmap.step`. Fix: one message a step with every
group's rewards.

    flowmap trace examples/field/unreceived_push.py && flowmap report
"""

from __future__ import annotations

import threading

import numpy as np
import zmq

import flowmap

GROUPS, SAMPLES, STEPS = 8, 4096, 3
MESSAGE = SAMPLES * 4  # float32 rewards of one group
EXPECT = {"kind": "unreceived", "seam": "reward -> (untraced)",
          "bytes_per_step": (GROUPS - 1) * MESSAGE}


def logger(ctx: zmq.Context, addr: str, sent: threading.Semaphore,
           got: threading.Semaphore) -> None:
    with flowmap.owner("logger"):
        pull = ctx.socket(zmq.PULL)
        pull.connect(addr)
        for step in range(STEPS):
            flowmap.step(step)
            sent.acquire()
            pull.recv()  # one message a step: the others stay queued
            got.release()
        pull.close(linger=0)


def main() -> None:
    ctx = zmq.Context()
    with flowmap.owner("reward"):
        push = ctx.socket(zmq.PUSH)
        port = push.bind_to_random_port("tcp://127.0.0.1")
        sent, got = threading.Semaphore(0), threading.Semaphore(0)
        t = threading.Thread(target=logger, args=(ctx, f"tcp://127.0.0.1:{port}", sent, got))
        t.start()
        for step in range(STEPS):
            flowmap.step(step)
            for _ in range(GROUPS):
                push.send(np.random.rand(SAMPLES).astype(np.float32).tobytes())
            sent.release()
            got.acquire()
        t.join()
        push.close(linger=0)
    ctx.term()


if __name__ == "__main__":
    main()
