"""Weight sync is retryable as a whole: a sync that fails midway loses no request.

GIVEN two real engines with 24 trajectories in flight, some half-generated
WHEN the sync fails on the second engine's `update_weights` (after its pause)
THEN the withdrawn requests are held by the rollout manager, a retry
resubmits them, and every one of the 24 trajectories finishes, under the new
version on both engines.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from flowmap.trainer.config import TaskConfig
from flowmap.trainer.dispatch import TrajectorySource
from flowmap.trainer.engine import EngineConfig, LLMEngine, SamplingParams
from flowmap.trainer.env import CountingEnv
from flowmap.trainer.model import ModelConfig, build_model
from flowmap.trainer.rollout import Finished, RolloutManager
from flowmap.trainer.task import CountingTask, Dataset, make_tokenizer
from flowmap.trainer.weight_sync import sync_weights

TRAJECTORIES = 24


def _rollout() -> tuple[RolloutManager, dict[str, torch.Tensor]]:
    task = CountingTask(make_tokenizer())
    cfg = ModelConfig(vocab_size=task.tokenizer.vocab_size, max_seq_len=64, d_model=32,
                      n_layers=1, n_heads=2, d_ff=64)
    engines = [LLMEngine(build_model(cfg, 0), EngineConfig(num_kv_blocks=64, block_size=8),
                         instance=i) for i in range(2)]
    params = SamplingParams(temperature=1.0, max_tokens=3, stop_token_ids=(task.tokenizer.eos_id,))
    rollout = RolloutManager(engines, CountingEnv(task, TaskConfig()), params)
    source = TrajectorySource(Dataset(0), n=8)
    for _ in range(TRAJECTORIES):
        rollout.dispatch(*source.next())
    new = {n: p.detach().clone() for n, p in build_model(cfg, 1).named_parameters()}
    return rollout, new


def _drain(rollout: RolloutManager) -> Iterator[Finished]:
    for _ in range(500):
        if not rollout.has_work():
            return
        yield from rollout.step()
    raise AssertionError("rollout did not finish in 500 steps")


class _FailOnce:
    """An engine's update_weights that raises the first time it is called."""

    def __init__(self, engine: LLMEngine) -> None:
        self.engine, self.real, self.calls = engine, engine.update_weights, 0

    def __call__(self, named, version: int) -> None:  # noqa: ANN001
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("update_weights: transport went away")
        self.real(named, version)


def test_a_sync_that_fails_midway_is_retried_and_every_trajectory_finishes() -> None:
    rollout, new = _rollout()
    finished = [f for _ in range(2) for f in rollout.step()]  # first tokens are out
    second = rollout.engines[1]
    in_flight_on_second = second.num_unfinished_requests()
    assert in_flight_on_second > 0
    second.update_weights = _FailOnce(second)  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="transport went away"):
        sync_weights(rollout.engines, rollout, new, version=1)
    # paused, and the withdrawn requests are held where the failure could not lose them
    assert second.num_unfinished_requests() == 0
    assert len(rollout.held[1]) == in_flight_on_second
    resubmitted = sync_weights(rollout.engines, rollout, new, version=1)  # the retry
    assert resubmitted >= in_flight_on_second and not rollout.held
    assert [e.weight_version for e in rollout.engines] == [1, 1]
    finished += list(_drain(rollout))
    assert len({f.traj_id for f in finished}) == TRAJECTORIES
    assert rollout.num_in_flight == 0 and not rollout.pending


def test_sync_attempts_retry_inside_one_call() -> None:
    rollout, new = _rollout()
    finished = list(rollout.step())
    rollout.engines[0].update_weights = _FailOnce(rollout.engines[0])  # type: ignore[method-assign]
    sync_weights(rollout.engines, rollout, new, version=1, attempts=2)
    finished += list(_drain(rollout))
    assert len({f.traj_id for f in finished}) == TRAJECTORIES
    for engine in rollout.engines:
        for name, p in engine.model.named_parameters():
            assert torch.equal(p, new[name]), name


def test_versions_only_go_up_through_a_sync() -> None:
    rollout, new = _rollout()
    sync_weights(rollout.engines, rollout, new, version=2)
    with pytest.raises(ValueError, match="older than the engine's 2"):
        sync_weights(rollout.engines, rollout, new, version=1)
    other = {n: t + 1 for n, t in new.items()}
    with pytest.raises(ValueError, match="already loaded with different weights"):
        sync_weights(rollout.engines, rollout, other, version=2)
    # a refused sync leaves the engine paused with its requests held; the next good one
    # resumes it, and nothing was lost
    assert rollout.held and rollout.engines[0].paused
    sync_weights(rollout.engines, rollout, other, version=3)
    assert len({f.traj_id for f in _drain(rollout)}) == TRAJECTORIES
