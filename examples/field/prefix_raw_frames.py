"""A ROUTER engine that serializes its replies itself: raw `pickle.dumps` frames.

A multi-turn agent loop against an engine over ZMQ DEALER/ROUTER, as servers that pick
their own serializer do: the engine takes `[identity, request]` with `recv_multipart`
and `pickle.loads`, and replies with `send_multipart([identity, pickle.dumps(reply)])`,
frames whose only figure is their length. The agent loads each reply with
`recv_pyobj`; what it loaded gives the seam its leaves. Four conversations take turns,
the agent sends only each turn's new tokens, and each reply is the whole conversation
so far: token ids `int32` and log-probs `float32`, 128 -> 256 -> 384 -> 512 rows.
By hand: each conversation's first 3 replies are resent, (128 + 256 + 384) x 8 B x 4.

    flowmap trace examples/field/prefix_raw_frames.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import pickle

import numpy as np
import zmq

import flowmap

STEPS, CONVERSATIONS, TURNS, NEW = 4, 4, 4, 64
EXPECT = {"kind": "prefix_resend", "seam": "engine -> agent",
          "bytes_per_step": (128 + 256 + 384) * 8 * CONVERSATIONS}


def engine(port: int) -> None:
    flowmap.set_owner("engine")
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.connect(f"tcp://127.0.0.1:{port}")
    rng, history = np.random.default_rng(0), {}
    for _ in range(STEPS * CONVERSATIONS * TURNS):
        identity, frame = router.recv_multipart()
        request = pickle.loads(frame)
        flowmap.step(request["step"])
        h = history.setdefault(request["conversation"], [])
        h += [*request["new_ids"].tolist(), *rng.integers(0, 32000, NEW).tolist()]
        router.send_multipart([identity, pickle.dumps({
            "conversation": request["conversation"],
            "token_ids": np.array(h, dtype=np.int32),  # the whole conversation
            "logprobs": -rng.random(len(h)).astype(np.float32)})])
    router.close(linger=1000)
    ctx.term()


def main() -> None:
    flowmap.set_owner("agent")
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    port = dealer.bind_to_random_port("tcp://127.0.0.1")
    p = mp.get_context("fork").Process(target=engine, args=(port,))
    p.start()
    rng = np.random.default_rng(1)
    for step in range(STEPS):
        flowmap.step(step)
        new = {c: rng.integers(0, 32000, NEW).astype(np.int32) for c in range(CONVERSATIONS)}
        for _ in range(TURNS):
            for c in range(CONVERSATIONS):
                dealer.send_pyobj({"conversation": f"{step}-{c}", "step": step, "new_ids": new[c]})
            for _ in range(CONVERSATIONS):
                reply = dealer.recv_pyobj()
                c = int(reply["conversation"].split("-")[1])
                new[c] = rng.integers(0, 32000, NEW).astype(np.int32)  # the tool's output
    p.join()
    dealer.close()
    ctx.term()


if __name__ == "__main__":
    main()
