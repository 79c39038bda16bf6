"""Asynchronous GRPO on a toy task, on a laptop CPU, in about a minute.

    python examples/grpo_tiny.py                    # defaults: 2 engines, 2 DP ranks
    python examples/grpo_tiny.py --steps 20 --dp 1 --max-staleness 2
    python examples/grpo_tiny.py --config my.yaml --set train.lr=1e-3
    python examples/grpo_tiny.py --set train.synchronous=true   # staleness 0, no overlap
    python examples/grpo_tiny.py --set train.kl_coef=0.05 --set train.ppo_epochs=2 \
        --set rollout.filter_zero_variance=true --set rollout.mask_truncated=true
    flowmap trace examples/grpo_tiny.py             # the same run, every seam recorded

The trainer lives in `flowmap.trainer`; this script only reads the
configuration, runs it, and prints the one-line summary.
"""

from __future__ import annotations

import sys

from flowmap.trainer.config import ConfigError, parse_args
from flowmap.trainer.driver import run


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = parse_args(argv)
    except ConfigError as exc:
        print(f"grpo_tiny: {exc}", file=sys.stderr)
        return 2
    summary = run(cfg)
    print(summary.line())
    return 0


if __name__ == "__main__":  # spawned rank processes import this file too: keep work in here
    sys.exit(main())
