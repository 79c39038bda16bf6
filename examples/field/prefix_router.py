"""Multi-turn env server resends the whole conversation each turn (DEALER -> ROUTER, numpy).

Three conversations per step, their turns arriving in a shuffled order each round.
By hand: prompts 48, 64, 80 tokens; each turn appends 40 tokens; 4 turns a step.
Each message carries tokens int32 + logprobs float32 = 8 B a token. Resent per step:
the three earlier turns of each conversation: sum over c of (P + 40k) * 8 for k = 0..2
= 8 * (3 * (48 + 64 + 80) + 3 * 40 * 3) = 8 * (576 + 360) = 7,488 B/step.
"""
import multiprocessing as mp
import random
import tempfile

import numpy as np
import zmq

import flowmap

EXPECT = {"kind": "prefix_resend", "seam": "env -> trainer", "bytes_per_step": 7488}
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
        convs = [rng_np.integers(0, 32000, p).astype(np.int32) for p in PROMPTS]
        for _ in range(TURNS):
            order = list(range(len(PROMPTS)))
            rng.shuffle(order)
            for c in order:
                s.send_pyobj({"conv": c, "tokens": convs[c],
                              "logprobs": np.zeros(len(convs[c]), np.float32)})
                convs[c] = np.concatenate([convs[c], rng_np.integers(0, 32000, TURN).astype(np.int32)])
        s.recv()  # the trainer's go-ahead for the next step
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
            ident, msg = r.recv_multipart()
        r.send_multipart([ident, b"go"])
    t.join()
    r.close()


if __name__ == "__main__":
    main()
