"""The whole batch sent to every data-parallel rank, each keeping its share.

Reported in THUDM/slime #2384 (the full `rollout_routed_experts` to every
Megatron rank: host OOM at 64K responses; fixed by slicing per rank, #2385).
Each step the driver puts the same batch in shared memory for each of `RANKS`
trainer ranks; flowmap's `duplicate` finding counts every copy but one.

    flowmap trace examples/field/duplicate.py && flowmap report
"""

from __future__ import annotations

import torch

import flowmap

RANKS, BATCH, TOKENS, LAYERS, TOPK, STEPS = 4, 16, 128, 4, 8, 3


def main() -> None:
    flowmap.set_owner("driver")
    for step in range(STEPS):
        flowmap.step(step)
        batch = {"routed_experts": torch.zeros(BATCH, TOKENS, LAYERS, TOPK, dtype=torch.int32)}
        for rank in range(RANKS):  # the bug: each rank gets all BATCH rows
            flowmap.hop("driver", f"trainer/rank{rank}", batch, name="rollout_data",
                        transport="shm")


if __name__ == "__main__":
    main()
