"""Rollouts relayed through two middle processes over pipes, each re-wrapping them.

The shape of a driver-centric loop with a reward stage in the middle (OpenRLHF's
Ray actors, slime's rollout manager): the generator sends numpy trajectories through a
`multiprocessing.Pipe` to a reward process, which scores them and sends the same arrays on,
in a list (the scores follow in a message of their own), to a controller, which sends them
on again, in a dict, to the trainer: two relays in a chain. Each relay pickles the arrays again. Annotated with `flowmap.owner` and
`flowmap.step` only. The fix: the generator sends the arrays to the trainer, the middle
processes get what they read (`relay_fixed.py` shows it on a queue).

    flowmap trace examples/field/relay_pipe_chain.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import numpy as np

import flowmap

GROUPS, TOKENS, STEPS = 32, 512, 3
ROLLOUT = GROUPS * TOKENS * (8 + 4)  # token ids int64 + logprobs float32
# what passes through the reward process unchanged: it leaves and arrives each step
EXPECT = {"kind": "pass_through", "seam": "generator -> reward", "bytes_per_step": ROLLOUT}


def generator(out: Any) -> None:
    with flowmap.owner("generator"):
        for step in range(STEPS):
            flowmap.step(step)
            out.send({"tokens": np.random.randint(0, 32000, (GROUPS, TOKENS)),
                      "logprobs": np.random.rand(GROUPS, TOKENS).astype(np.float32)})


def reward(inbox: Any, out: Any) -> None:
    with flowmap.owner("reward"):
        for step in range(STEPS):
            flowmap.step(step)
            r = inbox.recv()
            scores = (r["tokens"] % 7 == 0).mean(axis=1).astype(np.float32)
            out.send([r["tokens"], r["logprobs"]])
            out.send(scores)


def controller(inbox: Any, out: Any) -> None:
    with flowmap.owner("controller"):
        for step in range(STEPS):
            flowmap.step(step)
            tokens, logprobs = inbox.recv()
            scores = inbox.recv()
            out.send({"batch": {"input_ids": tokens, "old_logprobs": logprobs}, "scores": scores})


def main() -> None:
    ctx = mp.get_context("fork")
    (g_in, g_out), (r_in, r_out), (c_in, c_out) = ctx.Pipe(False), ctx.Pipe(False), ctx.Pipe(False)
    procs = [ctx.Process(target=generator, args=(g_out,)),
             ctx.Process(target=reward, args=(g_in, r_out)),
             ctx.Process(target=controller, args=(r_in, c_out))]
    for p in procs:
        p.start()
    with flowmap.owner("trainer"):
        for step in range(STEPS):
            flowmap.step(step)
            msg = c_in.recv()
            assert msg["batch"]["input_ids"].shape == (GROUPS, TOKENS)
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
