"""Replay arrays padded to `max_seq_len` on their way to the trainer, the real lengths in the mask.

Reported in NovaSky-AI/SkyRL #2235 (routed experts expanded to
`[batch, max_seq_len, layers, top_k]` at the trainer) and
PrimeIntellect-ai/verifiers #1794 (33.6 MiB peak down to 3.05 MiB once packed).
Each step a batch of responses of varied length is padded to `MAX_SEQ_LEN` and
sent through shared memory with its `attention_mask`; flowmap counts the
mask's real positions on the hop and prices the padding in every leaf the mask
covers. The fix is packing with `cu_seqlens`.

    flowmap trace examples/field/padding.py && flowmap report
"""

from __future__ import annotations

import torch

import flowmap

MAX_SEQ_LEN, LAYERS, TOPK, STEPS = 256, 4, 8, 3
LENGTHS = (40, 100, 64, 20)  # real tokens of the batch's four responses
# the padded positions of ids (8 B), mask (1 B) and experts (4 x 8 x 4 B)
EXPECT = {"kind": "padding", "seam": "rollout -> trainer",
          "bytes_per_step": (4 * MAX_SEQ_LEN - sum(LENGTHS)) * (8 + 1 + LAYERS * TOPK * 4)}


def batch() -> dict[str, torch.Tensor]:
    b = len(LENGTHS)
    mask = torch.zeros(b, MAX_SEQ_LEN, dtype=torch.bool)
    for i, n in enumerate(LENGTHS):
        mask[i, :n] = True
    return {
        "input_ids": torch.zeros(b, MAX_SEQ_LEN, dtype=torch.int64),
        "attention_mask": mask,
        "routed_experts": torch.zeros(b, MAX_SEQ_LEN, LAYERS, TOPK, dtype=torch.int32),
    }


def main() -> None:
    for step in range(STEPS):
        flowmap.step(step)
        flowmap.hop("rollout", "trainer", batch(), name="replay_batch", transport="shm")


if __name__ == "__main__":
    main()
