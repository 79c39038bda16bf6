"""A rollout server's results relayed by a controller thread over ZMQ PUSH/PULL.

The shape of an async rollout service fronted by a controller (sglang router -> verl agent
loop; SkyRL's generator -> trainer bridge): an engine thread pushes each step's
trajectories with `send_pyobj`, a controller thread pulls them and pushes them on to the
trainer thread, unchanged but inside a list. One process, three owners (`flowmap.owner`),
steps by `flowmap.step`. The fix: the engine pushes to the trainer's socket directly.

    flowmap trace examples/field/relay_zmq_threads.py && flowmap report
"""

from __future__ import annotations

import threading

import torch
import zmq

import flowmap

GROUPS, TOKENS, STEPS = 16, 1024, 3
EXPECT = {"kind": "pass_through", "seam": "engine -> controller",
          "bytes_per_step": GROUPS * TOKENS * (8 + 4)}  # int64 ids + float32 logprobs


def engine(ctx: zmq.Context, addr: str) -> None:
    with flowmap.owner("engine"):
        push = ctx.socket(zmq.PUSH)
        push.connect(addr)
        for step in range(STEPS):
            flowmap.step(step)
            push.send_pyobj({"tokens": torch.randint(0, 32000, (GROUPS, TOKENS)),
                             "logprobs": torch.randn(GROUPS, TOKENS)})
        push.close()


def controller(ctx: zmq.Context, pull: zmq.Socket, out: str) -> None:
    with flowmap.owner("controller"):
        push = ctx.socket(zmq.PUSH)
        push.connect(out)
        for step in range(STEPS):
            flowmap.step(step)
            r = pull.recv_pyobj()
            push.send_pyobj([r["tokens"], r["logprobs"]])
        pull.close()
        push.close()


def main() -> None:
    ctx = zmq.Context()
    with flowmap.owner("trainer"):
        pull = ctx.socket(zmq.PULL)
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        inbox = ctx.socket(zmq.PULL)  # bound here, then handed to the controller's thread
        inbox_port = inbox.bind_to_random_port("tcp://127.0.0.1")
        threads = [threading.Thread(target=controller,
                                    args=(ctx, inbox, f"tcp://127.0.0.1:{port}")),
                   threading.Thread(target=engine, args=(ctx, f"tcp://127.0.0.1:{inbox_port}"))]
        for t in threads:
            t.start()
        for step in range(STEPS):
            flowmap.step(step)
            tokens, _ = pull.recv_pyobj()
            assert tokens.shape == (GROUPS, TOKENS)
        for t in threads:
            t.join()
        pull.close()
    ctx.term()


if __name__ == "__main__":
    main()
