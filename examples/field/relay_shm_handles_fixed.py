"""Control: a controller process relays torch tensors, which travel by shared memory.

rollout -> controller -> trainer through `torch.multiprocessing` queues. The rollout's
put moves each batch's storages into shared memory once; the controller's put of the
same tensors sends only their handles (a file descriptor and an offset, a few hundred
bytes), so nothing is copied through it: the relay is already the handle the
`pass_through` finding would advise, and sending straight to the trainer would copy as
much. No finding. (Numpy arrays are pickled into each message instead:
`relay_mp_queue.py`.)

    flowmap trace examples/field/relay_shm_handles_fixed.py && flowmap report
"""

from __future__ import annotations

from typing import Any

import torch
import torch.multiprocessing as mp

import flowmap

EXPECT = None  # the fix applied: no finding

STEPS, B, T = 4, 32, 640


def rollout(out: Any, done: Any) -> None:
    flowmap.set_owner("rollout")
    g = torch.Generator().manual_seed(23)
    for step in range(STEPS):
        flowmap.step(step)
        out.put({"tokens": torch.randint(0, 32000, (B, T), dtype=torch.int32, generator=g),
                 "old_logprobs": torch.randn(B, T, generator=g)})
    done.wait(30)  # torch shares storages by fd: the sender lives until they are taken


def trainer(inbox: Any, done: Any) -> None:
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        batch = inbox.get()
        float(batch["old_logprobs"].mean())
    done.set()


def main() -> None:
    q1, q2, done = mp.Queue(), mp.Queue(), mp.Event()
    procs = [mp.Process(target=rollout, args=(q1, done), name="rollout"),
             mp.Process(target=trainer, args=(q2, done), name="trainer")]
    for p in procs:
        p.start()
    with flowmap.owner("controller"):
        for step in range(STEPS):
            flowmap.step(step)
            q2.put(q1.get())  # the storages are in shared memory already: handles move
        done.wait(30)
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
