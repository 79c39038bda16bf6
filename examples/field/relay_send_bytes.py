"""Observations relayed by a process that serialises them itself and sends raw bytes.

The shape of an actor/learner split with a batching process in the middle (Ape-X's
replay feeders, an env-worker bridge): env workers send numpy observations through a
`multiprocessing.Pipe`; the batcher wraps them with `torch.from_numpy` (no copy, the
same memory) in a dataclass of its own, pickles that itself and sends the bytes with
`Connection.send_bytes`; the learner loads them with `pickle.loads`. No object crosses
the second pipe that the tracer could name: the bytes carry the observations' content
(`flowmap/integrations/transports/relay_bytes.py`). Annotated with `flowmap.owner` and
`flowmap.step` only. The fix: the env workers send to the learner, and the batcher gets
what it reads (`relay_send_bytes_fixed.py`, where the batcher sends what it computed).

    flowmap trace examples/field/relay_send_bytes.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import flowmap

ENVS, OBS, STEPS = 32, 1024, 3
OBS_BYTES = ENVS * OBS * 4  # float32 observations, sent on unchanged
EXPECT = {"kind": "pass_through", "seam": "env -> batcher", "bytes_per_step": OBS_BYTES}
TRANSFORM = False  # the control computes what it sends (relay_send_bytes_fixed.py)


@dataclass
class Batch:
    step: int
    obs: torch.Tensor


def env(out: Any) -> None:
    with flowmap.owner("env"):
        rng = np.random.default_rng(0)
        for step in range(STEPS):
            flowmap.step(step)
            out.send({"obs": rng.standard_normal((ENVS, OBS)).astype(np.float32)})


def batcher(inbox: Any, out: Any, transform: bool) -> None:
    with flowmap.owner("batcher"):
        for step in range(STEPS):
            flowmap.step(step)
            obs = torch.from_numpy(inbox.recv()["obs"])
            if transform:
                obs = (obs - obs.mean(1, keepdim=True)) / (obs.std(1, keepdim=True) + 1e-6)
            out.send_bytes(pickle.dumps(Batch(step, obs)))


def main(transform: bool = TRANSFORM) -> None:
    ctx = mp.get_context("fork")
    (e_in, e_out), (b_in, b_out) = ctx.Pipe(False), ctx.Pipe(False)
    procs = [ctx.Process(target=env, args=(e_out,)),
             ctx.Process(target=batcher, args=(e_in, b_out, transform))]
    for p in procs:
        p.start()
    with flowmap.owner("learner"):
        for step in range(STEPS):
            flowmap.step(step)
            batch = pickle.loads(b_in.recv_bytes())
            assert batch.obs.shape == (ENVS, OBS)
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
