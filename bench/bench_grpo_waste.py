"""Waste and learning of the default GRPO run: stale drops, partial groups, reward gain, tokens/s.

Run: python bench/bench_grpo_waste.py [--seeds 0 1 2] [--set section.field=value ...]

Instruments the trainer from outside (wrapping the ready buffer and the batch
hop), so the same script measures any version of `flowmap.trainer`:

- stale %: leaf trajectories dropped as stale / leaf trajectories registered;
- partial %: trained uid groups with fewer leaves than came back for that uid;
- reward gain: mean reward over the last 20 % of steps minus the first 20 %;
- tokens/s: generated tokens per second of the RL loop (the run summary's figure), and
  trained tokens/s: the generated tokens that were trained on (mask 1), per second;
- watermark: min/max of the target after each step, and how often it changed direction;
- filtered: zero-variance groups dropped (with `--set rollout.filter_zero_variance=true`).

Before/after figures of the trainer rework (issue 12) are in docs/trainer.md, "Measured".
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter

from flowmap.trainer import driver
from flowmap.trainer.config import build
from flowmap.trainer.ready_buffer import ReadyBuffer


def measure(seed: int, overrides: dict[str, object]) -> dict[str, float]:
    registered: Counter[str] = Counter()  # uid -> leaves registered
    trained_groups: list[tuple[str, int]] = []  # (uid, leaves trained)
    trained_tokens: list[int] = []  # per batch: generated tokens trained on (mask 1)
    register = ReadyBuffer.register
    train_on = driver.Loop._train_on

    def counting_register(self, leaves, version):  # noqa: ANN001, ANN202
        for leaf in leaves:
            registered[leaf.uid] += 1
        return register(self, leaves, version)

    def counting_train_on(self, batch_id, leaves, *rest):  # noqa: ANN001, ANN202
        for uid, k in Counter(x.uid for x in leaves).items():
            trained_groups.append((uid, k))
        trained_tokens.append(sum(sum(x.response_mask) for x in leaves))
        return train_on(self, batch_id, leaves, *rest)

    ReadyBuffer.register = counting_register  # type: ignore[method-assign]
    driver.Loop._train_on = counting_train_on  # type: ignore[method-assign]
    try:
        summary = driver.run(build({"seed": seed, "progress": False, **overrides}))
    finally:
        ReadyBuffer.register = register  # type: ignore[method-assign]
        driver.Loop._train_on = train_on  # type: ignore[method-assign]
    leaves = sum(registered.values())
    partial = sum(1 for uid, k in trained_groups if k < registered[uid])
    w = summary.watermark
    turns = sum(1 for a, b, c in zip(w, w[1:], w[2:], strict=False) if (b - a) * (c - b) < 0)
    return {
        "seed": seed,
        "leaves": leaves,
        "stale_pct": 100.0 * summary.dropped_stale / max(leaves, 1),
        "partial_pct": 100.0 * partial / max(len(trained_groups), 1),
        "groups": len(trained_groups),
        "filtered": getattr(summary, "groups_filtered", 0),  # zero-variance groups dropped
        "reward_first": summary.reward_first,
        "reward_last": summary.reward_last,
        "gain": summary.reward_last - summary.reward_first,
        "tokens_per_s": summary.tokens_per_s,
        "trained_tok_per_s": sum(trained_tokens) / max(summary.rl_wall_s, 1e-9),
        "rl_wall_s": summary.rl_wall_s,
        "max_staleness": max(summary.staleness_per_step, default=0),
        "wm_min": min(w, default=0),
        "wm_max": max(w, default=0),
        "wm_turns": turns,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ns = parser.parse_args()
    overrides: dict[str, object] = {}
    for item in ns.set:
        key, _, value = item.partition("=")
        overrides[key] = value
    rows = [measure(seed, overrides) for seed in ns.seeds]
    cols = ["seed", "leaves", "stale_pct", "partial_pct", "groups", "filtered", "reward_first",
            "reward_last", "gain", "tokens_per_s", "trained_tok_per_s", "rl_wall_s",
            "max_staleness", "wm_min", "wm_max", "wm_turns"]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols))
    for c in ("stale_pct", "partial_pct", "gain", "tokens_per_s", "trained_tok_per_s", "rl_wall_s"):
        print(f"mean {c}: {statistics.mean(r[c] for r in rows):.3f}")


if __name__ == "__main__":
    main()
