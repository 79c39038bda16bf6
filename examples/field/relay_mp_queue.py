"""A controller process relays rollouts from the generator to the trainer, re-wrapped.

The shape of a single-controller RL loop (volcengine/verl's driver, NVIDIA-NeMo/RL #2414):
a generator process puts each step's trajectories on a `multiprocessing` queue, a controller
process takes them and puts them, unchanged but wrapped in a dict with its own bookkeeping,
on the trainer's queue. The arrays are numpy's, which `multiprocessing` pickles into each
message: the controller receives every byte and sends it again. (Torch tensors would travel
by shared memory instead: a relay of those moves only their handles, nothing to spare:
`relay_shm_handles_fixed.py`.) The only annotations are `flowmap.owner` and `flowmap.step`:
the relay is found from the storages the controller received and sent on.
The fix (`relay_mp_queue_fixed.py`): the generator puts straight on the trainer's queue.

    flowmap trace examples/field/relay_mp_queue.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import torch

import flowmap

GROUPS, TOKENS, STEPS = 16, 256, 3
# tokens int64 + logprobs float32, once a step through the controller
EXPECT = {"kind": "pass_through", "seam": "generator -> controller",
          "bytes_per_step": GROUPS * TOKENS * (8 + 4)}


def generator(out: mp.Queue, done: Any) -> None:
    with flowmap.owner("generator"):
        for step in range(STEPS):
            flowmap.step(step)
            out.put({"tokens": torch.randint(0, 32000, (GROUPS, TOKENS)).numpy(),
                     "logprobs": torch.randn(GROUPS, TOKENS).numpy()})
        done.wait()  # torch shares storages by fd: the sender lives until they are taken


def controller(inbox: mp.Queue, out: mp.Queue, done: Any) -> None:
    with flowmap.owner("controller"):
        for step in range(STEPS):
            flowmap.step(step)
            rollout = inbox.get()
            out.put({"step": step, "batch": [rollout["tokens"], rollout["logprobs"]]})
        done.wait()


def main() -> None:
    ctx = mp.get_context("spawn")
    a, b, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=generator, args=(a, done)),
             ctx.Process(target=controller, args=(a, b, done))]
    for p in procs:
        p.start()
    with flowmap.owner("trainer"):
        for step in range(STEPS):
            flowmap.step(step)
            msg = b.get()
            assert msg["batch"][0].shape == (GROUPS, TOKENS)
    done.set()
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
