"""A replay-buffer process cuts each received batch into micro-batches and pushes them on.

The shape of a buffer process between the rollout engine and the trainer (OpenRLHF's and
AReaL's replay buffers), all over ZMQ PUSH/PULL `send_pyobj`: the buffer pulls a step's
batch, `torch.chunk`s it into micro-batches and pushes each on, unchanged. Each micro-batch
is a view of the batch the buffer received (and, pickled, carries its whole storage: a
`view` finding too). Written by an independent tester, annotated only with owners and
steps. The fix: the engine sends the trainer its micro-batches (or the batch) directly.

    flowmap trace examples/field/relay_chunks_zmq.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import socket

import torch
import zmq

import flowmap

STEPS, BATCH, TOKENS, MICRO = 4, 32, 1024, 4
# int64 ids + float32 log-probs, once a step through the buffer
EXPECT = {"kind": "pass_through", "seam": "rollout -> buffer",
          "bytes_per_step": BATCH * TOKENS * (8 + 4)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def buffer(inbox: str, outbox: str) -> None:
    flowmap.set_owner("buffer")
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.bind(inbox)
    push.connect(outbox)
    for step in range(STEPS):
        flowmap.step(step)
        batch = pull.recv_pyobj()
        ids = torch.chunk(batch["input_ids"], MICRO)
        logprobs = torch.chunk(batch["old_logprobs"], MICRO)
        for k in range(MICRO):
            push.send_pyobj({"micro_batch": k, "input_ids": ids[k], "old_logprobs": logprobs[k]})
    pull.close()
    push.close(linger=5000)
    ctx.term()


def trainer(inbox: str) -> None:
    flowmap.set_owner("trainer")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(inbox)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(MICRO):
            pull.recv_pyobj()["old_logprobs"].mean()
    pull.close()
    ctx.term()


def main() -> None:
    to_buffer, to_trainer = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    spawn = mp.get_context("spawn")
    procs = [spawn.Process(target=trainer, args=(to_trainer,)),
             spawn.Process(target=buffer, args=(to_buffer, to_trainer))]
    for p in procs:
        p.start()
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(to_buffer)
    flowmap.set_owner("rollout")
    for step in range(STEPS):
        flowmap.step(step)
        push.send_pyobj({"input_ids": torch.randint(0, 32000, (BATCH, TOKENS)),
                         "old_logprobs": torch.randn(BATCH, TOKENS)})
    for p in procs:
        p.join()
    push.close()
    ctx.term()


if __name__ == "__main__":
    main()
