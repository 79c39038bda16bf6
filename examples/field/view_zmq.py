"""A prompt's rows sent with ZMQ `send_pyobj` as a view of the whole padded batch.

A rollout worker answering per-request over ZMQ (sglang's tokenizer manager / detokenizer
pattern): for each of a few requests it sends `batch[i:i+1]` of the step's padded token
batch. Plain pickle of a torch view writes its whole storage, so each message carries the
batch. One process, an owner per thread, steps by `flowmap.step`. Fix: `.clone()` the rows.

    flowmap trace examples/field/view_zmq.py && flowmap report
"""

from __future__ import annotations

import threading

import torch
import zmq

import flowmap

BATCH, TOKENS, REQUESTS, STEPS = 64, 1024, 2, 3
ROW = TOKENS * 8  # int64
EXPECT = {"kind": "view", "seam": "worker -> client",
          "bytes_per_step": REQUESTS * (BATCH * ROW - ROW)}


def client(ctx: zmq.Context, addr: str) -> None:
    with flowmap.owner("client"):
        pull = ctx.socket(zmq.PULL)
        pull.connect(addr)
        for _ in range(STEPS * REQUESTS):
            assert pull.recv_pyobj().shape == (1, TOKENS)
        pull.close()


def main() -> None:
    ctx = zmq.Context()
    with flowmap.owner("worker"):
        push = ctx.socket(zmq.PUSH)
        port = push.bind_to_random_port("tcp://127.0.0.1")
        t = threading.Thread(target=client, args=(ctx, f"tcp://127.0.0.1:{port}"))
        t.start()
        for step in range(STEPS):
            flowmap.step(step)
            batch = torch.randint(0, 32000, (BATCH, TOKENS))
            for i in range(REQUESTS):
                push.send_pyobj(batch[i:i + 1])  # the bug: pickles all BATCH rows
        t.join()
        push.close()
    ctx.term()


if __name__ == "__main__":
    main()
