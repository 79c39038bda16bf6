"""The driver funnel: rollout output goes through the driver to the trainer unchanged.

Reported in NVIDIA-NeMo/RL #2414 and #1877 (135 s of a 946 s step in the
driver), and volcengine/verl RFC #5400 (TransferQueue: "all DataProto objects
must be routed through RayPPOTrainer"). Each step the rollout worker returns a
batch to the driver by Ray call, and the driver hands the same tensors to the
trainer; flowmap's `pass_through` finding says to pass a handle instead.

    flowmap trace examples/field/pass_through.py && flowmap report
"""

from __future__ import annotations

import torch

import flowmap

BATCH, TOKENS, STEPS = 32, 512, 3


def main() -> None:
    for step in range(STEPS):
        flowmap.step(step)
        batch = {"input_ids": torch.zeros(BATCH, TOKENS, dtype=torch.int64),
                 "logprobs": torch.zeros(BATCH, TOKENS)}
        flowmap.hop("rollout", "driver", batch, name="rollout_output", transport="rpc")
        flowmap.hop("driver", "trainer", batch, name="train_batch", transport="rpc")


if __name__ == "__main__":
    main()
