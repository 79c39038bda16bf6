"""Expert ids sent as int32 where 8 bits hold them.

Reported in sgl-project/sglang #31219 and volcengine/verl #5240 (routed experts
as int32/int64); prime-rl ships them as uint8, 384 B/token for Qwen3-30B-A3B.
The program declares how many experts there are (a `range/<leaf>` counter);
flowmap's `wide_ids` finding names the narrower dtype and the bytes it spares.
Under `--project deepseek-v3.2` the preset's `experts` bounds the ids instead.

    flowmap trace examples/field/wide_ids.py && flowmap report
"""

from __future__ import annotations

import torch

import flowmap

EXPERTS, TOKENS, LAYERS, TOPK, STEPS = 64, 128, 4, 8, 3
EXPECT = {"kind": "wide_ids", "seam": "rollout -> trainer",
          "bytes_per_step": TOKENS * LAYERS * TOPK * 4 * 3 / 4}


def main() -> None:
    flowmap.counter("range/routed_experts", EXPERTS)  # ids 0..63
    for step in range(STEPS):
        flowmap.step(step)
        replay = {"routed_experts": torch.randint(0, EXPERTS, (TOKENS, LAYERS, TOPK),
                                                  dtype=torch.int32)}
        flowmap.hop("rollout", "trainer", replay, name="replay", transport="rpc",
                    dims={"routed_experts": ("tokens", "layers", "topk")})


if __name__ == "__main__":
    main()
