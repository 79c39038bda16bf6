"""A rollout server that answers each turn with the conversation's ids so far, over ZMQ.

The shape of OpenAI-style multi-turn servers behind RL agent loops (SkyRL,
slime's agentic rollouts): the client PUSHes a request, the server PUSHes back
`{"input_ids": [1, L]}` for the whole conversation, prompt and earlier turns
included. Three conversations interleaved, five turns each; a batch of one
(`[1, L]`), as tokenizers return it.

    flowmap trace examples/field/prefix_zmq.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import torch
import zmq

import flowmap

CONVERSATIONS, TURNS, STEPS = 3, 5, 3
PROMPT, TURN_TOKENS = 300, 150  # the first turn holds the prompt; each turn adds 150 tokens
# resent per step: turns 1..4 of each conversation again, int64 ids
EXPECT = {"kind": "prefix_resend", "seam": "server -> client",
          "bytes_per_step": CONVERSATIONS * sum(PROMPT + k * TURN_TOKENS for k in range(4)) * 8}


def server(port: int) -> None:
    flowmap.set_owner("server")
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port}")
    for step in range(STEPS):
        flowmap.step(step)
        so_far = [torch.randint(0, 151_000, (1, PROMPT)) for _ in range(CONVERSATIONS)]
        for turn in range(TURNS):
            for c in range(CONVERSATIONS):
                if turn:  # the turn's tokens, after the conversation so far
                    so_far[c] = torch.cat([so_far[c], torch.randint(0, 151_000, (1, TURN_TOKENS))], 1)
                push.send_pyobj({"input_ids": so_far[c]})
    push.close()
    ctx.term()


def main() -> None:
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    p = mp.get_context("spawn").Process(target=server, args=(port,))
    p.start()
    flowmap.set_owner("client")
    for _ in range(STEPS * TURNS * CONVERSATIONS):
        pull.recv_pyobj()
    p.join()
    pull.close()
    ctx.term()


if __name__ == "__main__":
    main()
