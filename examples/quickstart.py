"""The smallest instrumented pipeline: three owners, three seams, one counter.

    flowmap trace examples/quickstart.py
    flowmap report

Runs as plain Python too (`python examples/quickstart.py`): every flowmap call
is a no-op when nothing traces.
"""

from __future__ import annotations

import torch

import flowmap


@flowmap.seam("reward", args=["responses"])
def score(responses: torch.Tensor) -> torch.Tensor:
    """A seam by decorator: the call is `driver -> reward`, the result `reward -> driver`."""
    return (responses % 7 == 0).float().mean(-1)  # (B,)


def main() -> None:
    with flowmap.owner("driver"):
        for step in range(10):
            flowmap.step(step)
            prompts = torch.randint(0, 100, (8, 16))  # (B, P)
            flowmap.hop("dataset", "driver", {"prompts": prompts}, name="env_group",
                        items=[f"s{step}-{i}" for i in range(8)])
            responses = torch.randint(0, 100, (8, 32))  # (B, R)
            flowmap.hop("rollout/0", "driver", {"responses": responses,
                                                "rollout_log_probs": torch.zeros(8, 32)},
                        name="trajectory", items=[f"s{step}-{i}" for i in range(8)])
            rewards = score(responses)
            flowmap.counter("reward_mean", rewards.mean().item())


if __name__ == "__main__":
    main()
