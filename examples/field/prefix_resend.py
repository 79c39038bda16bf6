"""Multi-turn rollout that resends the replay arrays of the whole conversation every turn.

Reported in sgl-project/sglang #24851 (routing replay for the prefix returned
again each turn: ~1 s latency spikes). Each step a conversation of `TURNS`
turns runs; every turn the engine returns `routed_experts` for all the tokens so
far. flowmap sees the leaf grow turn by turn on one item and prices the resent
prefix; the fix is to send only the new turn's rows.

    flowmap trace examples/field/prefix_resend.py && flowmap report
"""

from __future__ import annotations

import torch

import flowmap

TURN_TOKENS, TURNS, LAYERS, TOPK, STEPS = 64, 4, 4, 8, 3
EXPECT = {"kind": "prefix_resend", "seam": "engine -> agent_loop",
          "bytes_per_step": TURN_TOKENS * (1 + 2 + 3) * LAYERS * TOPK * 4}


def main() -> None:
    for step in range(STEPS):
        flowmap.step(step)
        conversation = f"conv-{step}"
        for turn in range(1, TURNS + 1):
            tokens = turn * TURN_TOKENS  # the whole conversation so far
            reply = {"routed_experts": torch.zeros(tokens, LAYERS, TOPK, dtype=torch.int32)}
            flowmap.hop("engine", "agent_loop", reply, name="turn_output", transport="rpc",
                        items=[conversation],
                        dims={"routed_experts": ("tokens", "layers", "topk")})


if __name__ == "__main__":
    main()
