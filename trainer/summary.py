"""The run summary: what one run produced, learned and wasted (the example's last line).

The waste figures are the ones issue 12 holds the trainer to: leaf
trajectories dropped as stale against those generated, groups trained,
dropped stale and filtered; `bench/bench_grpo_waste.py` reads the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class RunSummary:
    steps: int
    wall_s: float
    rl_wall_s: float
    reward_per_step: list[float]
    staleness_per_step: list[int]
    loss_per_step: list[float]
    generated_tokens: int
    dropped_stale: int  # leaf trajectories dropped as stale (waiting, or refused on arrival)
    resubmitted: int
    watermark: list[int] = field(default_factory=list)  # target after each step
    leaves_registered: int = 0  # leaf trajectories that came back from rollout
    groups_trained: int = 0
    groups_dropped_stale: int = 0
    groups_filtered: int = 0  # zero-variance groups dropped (rollout.filter_zero_variance)
    leaves_truncated: int = 0  # trained leaves masked as truncated (rollout.mask_truncated)

    @property
    def stale_fraction(self) -> float:
        """Share of the generated leaf trajectories that were wasted as stale."""
        return self.dropped_stale / max(self.leaves_registered, 1)

    def _window(self) -> int:
        return max(1, len(self.reward_per_step) // 5)

    @property
    def reward_first(self) -> float:
        k = self._window()
        return sum(self.reward_per_step[:k]) / k

    @property
    def reward_last(self) -> float:
        k = self._window()
        return sum(self.reward_per_step[-k:]) / k

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / max(self.rl_wall_s, 1e-9)

    def line(self) -> str:
        return (
            f"grpo_tiny: {self.steps} steps in {self.wall_s:.1f} s · reward "
            f"{self.reward_first:.2f} -> {self.reward_last:.2f} (first/last 20% of steps) · "
            f"{self.tokens_per_s:,.0f} tok/s · max staleness {max(self.staleness_per_step, default=0)}"
            f" · {self.dropped_stale} of {self.leaves_registered} samples dropped as stale"
            f" ({100 * self.stale_fraction:.1f} %) · {self.groups_trained} groups trained, "
            f"{self.groups_dropped_stale} dropped stale, {self.groups_filtered} filtered"
            f" · {self.resubmitted} requests resubmitted"
        )
