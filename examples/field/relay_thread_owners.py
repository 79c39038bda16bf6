"""Server roles run as threads, each named with `flowmap.set_owner`; the middle one relays.

An SGLang-style server in one process: the scheduler thread PUSHes each finished request
(`output_ids int64 [256]`, `output_logprobs float32 [256]`) to the tokenizer-manager
thread, which forwards the object unchanged (`send_pyobj`) to the trainer's client. Each
thread names its role with `flowmap.set_owner`, as it would name a process: in a thread
it names that thread. The fix: the scheduler pushes to the client's socket directly.
By hand: 8 requests x (2,048 + 1,024) B a step through the relay.

    flowmap trace examples/field/relay_thread_owners.py && flowmap report
"""

from __future__ import annotations

import threading

import torch
import zmq

import flowmap

STEPS, REQUESTS, TOKENS = 4, 8, 256
EXPECT = {"kind": "pass_through", "seam": "engine -> tokenizer_manager",
          "bytes_per_step": REQUESTS * TOKENS * (8 + 4)}
TO_MANAGER, TO_CLIENT = "inproc://scheduler-to-manager", "inproc://manager-to-client"


def engine(ctx: zmq.Context, ready: threading.Barrier) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("engine")
    push = ctx.socket(zmq.PUSH)
    push.bind(TO_MANAGER)
    ready.wait()
    for step in range(STEPS):
        flowmap.step(step)
        for r in range(REQUESTS):
            push.send_pyobj({"rid": f"req-{step}-{r}",
                             "output_ids": torch.randint(0, 32000, (TOKENS,)),
                             "output_logprobs": -torch.rand(TOKENS)})
    push.close(linger=1000)


def tokenizer_manager(ctx: zmq.Context, ready: threading.Barrier) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("tokenizer_manager")
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.connect(TO_MANAGER)
    push.bind(TO_CLIENT)
    ready.wait()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(REQUESTS):
            push.send_pyobj(pull.recv_pyobj())  # forwarded as it came
    pull.close()
    push.close(linger=1000)


def main() -> None:
    flowmap.set_owner("trainer")
    ctx, ready = zmq.Context(), threading.Barrier(3)
    threads = [threading.Thread(target=f, args=(ctx, ready)) for f in (engine, tokenizer_manager)]
    for t in threads:
        t.start()
    pull = ctx.socket(zmq.PULL)
    pull.connect(TO_CLIENT)
    ready.wait()
    for step in range(STEPS):
        flowmap.step(step)
        batch = [pull.recv_pyobj() for _ in range(REQUESTS)]
        assert torch.stack([b["output_ids"] for b in batch]).shape == (REQUESTS, TOKENS)
    for t in threads:
        t.join()
    pull.close()
    ctx.term()


if __name__ == "__main__":
    main()
