"""Control for the prefix resends: each turn sends only its new tokens (DEALER -> ROUTER).

The same three conversations as a multi-turn server, but a message carries the turn's new
rows only (the receiver keeps the prefix): every message after the prompt is 40 tokens.
"""
import multiprocessing as mp
import random
import tempfile

import numpy as np
import zmq

import flowmap

EXPECT = None
STEPS = 4
PROMPTS = [48, 64, 80]
TURN = 40
TURNS = 4


def env(addr: str) -> None:
    flowmap.set_owner("env")
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.connect(addr)
    for step in range(STEPS):
        flowmap.step(step)
        rng = random.Random(step)
        rng_np = np.random.default_rng(step)
        for k in range(TURNS):
            order = list(range(len(PROMPTS)))
            rng.shuffle(order)
            for c in order:
                n = PROMPTS[c] if k == 0 else TURN
                s.send_pyobj({"conv": c, "tokens": rng_np.integers(0, 32000, n).astype(np.int32),
                              "logprobs": np.zeros(n, np.float32)})
        s.recv()
    s.close()


def main() -> None:
    flowmap.set_owner("trainer")
    addr = f"ipc://{tempfile.mkdtemp()}/env"
    t = mp.get_context("fork").Process(target=env, args=(addr,))
    t.start()
    ctx = zmq.Context()
    r = ctx.socket(zmq.ROUTER)
    r.bind(addr)
    for step in range(STEPS):
        flowmap.step(step)
        ident = None
        for _ in range(TURNS * len(PROMPTS)):
            ident, _msg = r.recv_multipart()
        r.send_multipart([ident, b"go"])
    t.join()
    r.close()


if __name__ == "__main__":
    main()
