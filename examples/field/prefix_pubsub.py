"""Env replies carry the whole trajectory so far each turn (PUB -> SUB, numpy obs history).

4 episodes interleaved round-robin, each turn appends 16 observations of 64 floats; the
message holds `obs float32 [L, 64]` and `actions int32 [L]` for the whole episode:
260 B a step of history. Episodes start at 16 steps; 5 turns.
By hand: per episode turns 0..3 resent: (16 + 32 + 48 + 64) x 260 = 41,600; x 4 = 166,400.
"""
import multiprocessing as mp
import tempfile
import time

import numpy as np
import zmq

import flowmap

STEPS = 3
K, TURNS, GROW = 4, 5, 16
EXPECT = {"kind": "prefix_resend", "seam": "env -> agent", "bytes_per_step": 166400}


def agent(addr: str, ready) -> None:
    flowmap.set_owner("agent")
    s = zmq.Context().socket(zmq.SUB)
    s.setsockopt(zmq.SUBSCRIBE, b"")
    s.connect(addr)
    ready.set()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(K * TURNS):
            s.recv_pyobj()


def main() -> None:
    flowmap.set_owner("env")
    addr = f"ipc://{tempfile.mkdtemp()}/env"
    s = zmq.Context().socket(zmq.PUB)
    s.bind(addr)
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=agent, args=(addr, ready))
    p.start()
    ready.wait()
    time.sleep(0.5)  # the subscription reaches the publisher
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        obs = [np.empty((0, 64), np.float32) for _ in range(K)]
        actions = [np.empty(0, np.int32) for _ in range(K)]
        for _turn in range(TURNS):
            for k in range(K):  # each turn's GROW rows, after the episode so far
                obs[k] = np.concatenate([obs[k], rng.random((GROW, 64), dtype=np.float32)])
                actions[k] = np.concatenate([actions[k],
                                             rng.integers(0, 6, GROW).astype(np.int32)])
                s.send_pyobj({"obs": obs[k], "actions": actions[k]})
            time.sleep(0.01)
    p.join()
    s.close()


if __name__ == "__main__":
    main()
