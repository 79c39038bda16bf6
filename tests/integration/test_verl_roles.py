"""How a plain worker group's role is named from its class (no verl needed)."""

from __future__ import annotations

import pytest

from flowmap.integrations.verl import role_from_class


@pytest.mark.parametrize("cls, role", [
    ("ActorRolloutRefWorker", "actor_rollout_ref"),  # verl's own fsdp worker
    ("RewardWorker", "reward"),
    ("CriticWorker", "critic"),
    ("ActorRolloutWorker", "actor_rollout"),
    ("Worker", "worker"),  # a bare Worker keeps its name
    ("PPO2Learner", "ppo2_learner"),
])
def test_role_is_the_class_name_in_snake_case_without_worker(cls, role):
    assert role_from_class(cls) == role
