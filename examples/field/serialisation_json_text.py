"""Advantages sent as JSON text that the program encoded itself: a `str` down a pipe.

A reward server that answers with `json.dumps(scores.tolist())` (an HTTP handler's
body, a Redis value, a log line reused as a message) hands the transport a string:
its own bytes are its length, the very bytes that cross, so nothing looks wasted.
Its cost is what the text holds: each float32 written as ~20 characters. flowmap
reads three 64-byte windows of the frame the pipe already serialised, finds number
text there, and prices the message against the float32 array the fix sends.

    flowmap trace examples/field/serialisation_json_text.py && flowmap report
"""

from __future__ import annotations

import json
import multiprocessing as mp

import torch

import flowmap

SAMPLES, TOKENS, STEPS = 8, 512, 3
# per float: "-0.30318892002105713, " is ~20 characters for the 4 bytes of a float32
EXPECT = {"kind": "serialisation", "seam": "reward -> trainer",
          "bytes_per_step": SAMPLES * TOKENS * (20 - 4)}


def reward(conn: mp.connection.Connection) -> None:
    flowmap.set_owner("reward")
    torch.manual_seed(0)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(SAMPLES):
            advantages = torch.randn(TOKENS)
            conn.send(json.dumps(advantages.tolist()))
    conn.close()


def main() -> None:
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    p = ctx.Process(target=reward, args=(there,))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(SAMPLES):
            torch.tensor(json.loads(here.recv()))
    p.join()


if __name__ == "__main__":
    main()
