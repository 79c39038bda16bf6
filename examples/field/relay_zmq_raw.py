"""An engine's logits relayed over ZMQ by a bridge that serialises them itself into raw frames.

The shape of a gateway between an inference engine and a trainer (a tokenizer manager
that re-frames the engine's output; an agent loop that forwards it): the engine thread
sends each step's logits with `send_pyobj`; the bridge thread loads them, pickles them
again inside a tuple of its own and sends the bytes with `send`; the trainer loads them
with `pickle.loads`. The second socket carries no object the tracer could name: the
bytes carry the logits' content (`flowmap/integrations/transports/relay_bytes.py`).
One process, three owners, steps by `flowmap.step` (the engine's, one message in flight). The fix: the engine sends to the
trainer, and the bridge gets what it reads (`relay_zmq_raw_fixed.py`, where the bridge
sends what it computed).

    flowmap trace examples/field/relay_zmq_raw.py && flowmap report
"""

from __future__ import annotations

import pickle
import threading

import numpy as np
import zmq

import flowmap

ROWS, VOCAB, STEPS = 64, 512, 3
EXPECT = {"kind": "pass_through", "seam": "engine -> bridge", "bytes_per_step": ROWS * VOCAB * 4}


def engine(ctx: zmq.Context, turn: threading.Semaphore) -> None:
    with flowmap.owner("engine"):
        push = ctx.socket(zmq.PUSH)
        push.connect("inproc://bridge")
        rng = np.random.default_rng(0)
        for step in range(STEPS):
            turn.acquire()  # the process's step is the engine's: one message in flight
            flowmap.step(step)
            push.send_pyobj({"logits": rng.standard_normal((ROWS, VOCAB)).astype(np.float32)})
        push.close(linger=1000)


def bridge(ctx: zmq.Context, inbox: zmq.Socket, turn: threading.Semaphore,
           transform: bool) -> None:
    with flowmap.owner("bridge"):
        push = ctx.socket(zmq.PUSH)
        push.connect("inproc://trainer")
        for step in range(STEPS):
            logits = inbox.recv_pyobj()["logits"]
            if transform:
                logits = logits - logits.max(axis=1, keepdims=True)  # what it computed
            push.send(pickle.dumps(("logits", step, logits)))
            turn.release()
        push.close(linger=1000)


def main(transform: bool = False) -> None:
    ctx = zmq.Context()
    inbox, trainer_in = ctx.socket(zmq.PULL), ctx.socket(zmq.PULL)
    inbox.bind("inproc://bridge")
    trainer_in.bind("inproc://trainer")
    turn = threading.Semaphore(1)
    threads = [threading.Thread(target=engine, args=(ctx, turn)),
               threading.Thread(target=bridge, args=(ctx, inbox, turn, transform))]
    for t in threads:
        t.start()
    with flowmap.owner("trainer"):
        for _ in range(STEPS):
            _, _, logits = pickle.loads(trainer_in.recv())
            assert logits.shape == (ROWS, VOCAB)
    for t in threads:
        t.join()
    inbox.close()
    trainer_in.close()
    ctx.term()


if __name__ == "__main__":
    main()
