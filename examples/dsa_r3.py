"""The DSA R3 case: MoE routing and sparse-attention indexer replay, payload vs handle.

    python examples/dsa_r3.py --transport payload    # replay arrays ride the control path
    python examples/dsa_r3.py --transport handle     # a replay store; only handles travel
    flowmap trace -o runs/payload examples/dsa_r3.py --transport payload
    flowmap trace -o runs/handle examples/dsa_r3.py --transport handle
    flowmap report runs/payload --project deepseek-v3.2@32k
    flowmap diff runs/payload runs/handle --project deepseek-v3.2@32k

The built-in GRPO trainer with a MoE feed-forward (4 experts, top-2) and
DSA-style sparse attention (each query keeps the 8 past positions its indexer
scores highest). Rollout records both selections per token and layer
(`routed_experts`, `indexer_topk`, int32) and the DP ranks replay them (R3).
The arrays are tiny here; projected to DeepSeek-V3.2 at 32K tokens (61 layers,
top-2048 indexer) `indexer_topk` is about 16 GB per sample, which is why how it
travels matters. Both transports train identically (same seed, same losses).
See docs/case-study-dsa-r3.md.
"""

from __future__ import annotations

import sys

from flowmap.trainer.config import ConfigError, parse_args
from flowmap.trainer.driver import run

# Small enough to finish in well under a minute on 2 cores; every other setting is the
# trainer's default and can be changed with the usual flags and `--set`.
DEFAULTS = {
    "model.moe_experts": 4,
    "model.moe_top_k": 2,
    "model.dsa_index_topk": 8,
    "model.dsa_index_dim": 16,
    "model.dsa_index_heads": 2,
    "train.steps": 12,
    # Each step is waited for before rollout goes on, so a run depends on its seed alone and
    # the payload and handle runs differ only in the transport (`flowmap diff` shows just
    # that). `--set train.synchronous=false` runs the asynchronous loop instead.
    "train.synchronous": True,
}


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = parse_args(argv, prog="dsa_r3", defaults=DEFAULTS,
                         description="GRPO with MoE + DSA replay, payload or handle transport.")
    except ConfigError as exc:
        print(f"dsa_r3: {exc}", file=sys.stderr)
        return 2
    summary = run(cfg)
    losses = " ".join(f"{x:.4f}" for x in summary.loss_per_step)
    print(f"dsa_r3 [{cfg.rollout.transport}]: " + summary.line().removeprefix("grpo_tiny: "))
    print(f"dsa_r3 [{cfg.rollout.transport}]: losses {losses}")
    return 0


if __name__ == "__main__":  # spawned rank processes import this file too: keep work in here
    sys.exit(main())
