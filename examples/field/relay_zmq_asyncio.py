"""Rollout workers' groups relayed by an asyncio gateway on `zmq.asyncio`.

The shape of SGLang's tokenizer manager and of async rollout gateways: two worker
processes push each step's group with `send_pyobj` on `zmq.asyncio` sockets; a gateway
process, an asyncio loop, awaits `recv_pyobj` for both groups and pushes them on to the
learner, unchanged, inside a dict. Owners by `flowmap.set_owner`, steps by
`flowmap.step`. The fix: the workers push to the learner's socket directly.

    flowmap trace examples/field/relay_zmq_asyncio.py && flowmap report
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import socket

import torch
import zmq
import zmq.asyncio

import flowmap

WORKERS, GROUP, TOKENS, STEPS = 2, 8, 512, 3
EXPECT = {"kind": "pass_through", "seam": "rollout -> gateway",
          "bytes_per_step": WORKERS * GROUP * TOKENS * (8 + 4)}  # int64 ids + float32 logprobs


async def rollout(index: int, port: int) -> None:
    flowmap.set_owner(f"rollout/{index}")
    ctx = zmq.asyncio.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port}")
    for step in range(STEPS):
        flowmap.step(step)
        await asyncio.sleep(0.01)
        await push.send_pyobj({"ids": torch.randint(0, 32000, (GROUP, TOKENS)),
                               "logprobs": torch.randn(GROUP, TOKENS)})
    push.close(linger=2000)
    ctx.term()


async def gateway(port_in: int, port_out: int) -> None:
    flowmap.set_owner("gateway")
    ctx = zmq.asyncio.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.bind(f"tcp://127.0.0.1:{port_in}")
    push.connect(f"tcp://127.0.0.1:{port_out}")
    for step in range(STEPS):
        flowmap.step(step)
        groups = [await pull.recv_pyobj() for _ in range(WORKERS)]
        await push.send_pyobj({"step": step, "groups": groups})
    pull.close()
    push.close(linger=2000)
    ctx.term()


def run_rollout(index: int, port: int) -> None:
    asyncio.run(rollout(index, port))


def run_gateway(port_in: int, port_out: int) -> None:
    asyncio.run(gateway(port_in, port_out))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    flowmap.set_owner("learner")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port_out = pull.bind_to_random_port("tcp://127.0.0.1")
    port_in = free_port()
    procs = [mp.Process(target=run_gateway, args=(port_in, port_out))] + [
        mp.Process(target=run_rollout, args=(i, port_in)) for i in range(WORKERS)]
    for p in procs:
        p.start()
    for step in range(STEPS):
        flowmap.step(step)
        msg = pull.recv_pyobj()
        assert len(msg["groups"]) == WORKERS
    for p in procs:
        p.join()
    pull.close()
    ctx.term()


if __name__ == "__main__":
    main()
