"""End to end: a short asynchronous GRPO run under `flowmap.tracing`, read back with `flowmap.load`.

GIVEN the real trainer (2 engines, 2 gloo rank processes, shared memory)
WHEN it runs a few steps traced
THEN the trace holds every role of the loop, at least 12 seams, `shm` hops to
both ranks, weight-sync bytes equal to the model's parameter bytes, the
required counters, and lifetimes: every trained leaf was registered no more
than `max_staleness` versions before the step that trained it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import flowmap
from flowmap.trainer.config import build
from flowmap.trainer.driver import model_config, run
from flowmap.trainer.model import build_model
from flowmap.trainer.task import make_tokenizer

ROLES = {"dataset", "driver", "rollout", "env", "ready_buffer", "batcher", "reward", "advantage",
         "trainer", "weight_sync"}
COUNTERS = {"in_flight", "target_watermark", "ready_buffer_depth", "kv_blocks_used",
            "staleness_max", "reward_mean", "loss", "stale_dropped", "groups_dropped_stale",
            "groups_filtered"}


@pytest.mark.slow
def test_short_traced_run(tmp_path: Path) -> None:
    cfg = build({"train.steps": 5, "train.groups_per_batch": 2, "rollout.n": 4,
                 "warmup.clean_steps": 10, "warmup.noisy_steps": 0, "progress": False})
    with flowmap.tracing(str(tmp_path / "run")) as path:
        summary = run(cfg)
    assert len(summary.reward_per_step) == 5

    r = flowmap.load(path)
    assert r.health.tracer_errors == 0
    assert {name.split("/")[0] for name in r.owners} >= ROLES
    assert {"trainer/rank0", "trainer/rank1", "rollout/0", "rollout/1"} <= set(r.owners)
    assert len(r.seams) >= 12
    assert set(r.counters) >= COUNTERS

    shm = {h.dst for h in r.hops if h.transport == "shm" and h.name == "micro_batch"}
    assert shm == {"trainer/rank0", "trainer/rank1"}

    param_bytes = sum(p.numel() * p.element_size()
                      for p in build_model(model_config(cfg, make_tokenizer().vocab_size), 0)
                      .parameters())
    state_dicts = [h for h in r.hops if (h.src, h.dst, h.name) == ("trainer/rank0", "weight_sync",
                                                                   "state_dict")]
    assert len(state_dicts) == 5 and all(h.nbytes == param_bytes for h in state_dicts)
    for i in (0, 1):
        weights = [h for h in r.hops if (h.src, h.dst, h.name) == ("weight_sync", f"rollout/{i}",
                                                                   "weights")]
        assert len(weights) == 5 and all(h.nbytes == param_bytes for h in weights)

    tag = {i: h.version for h in r.hops if h.name == "trajectory" for i in h.items}
    trained = [(i, h.step) for h in r.hops if h.name == "micro_batch" for i in h.items]
    assert trained, "no trajectory reached a rank"
    assert all(step - tag[i] <= cfg.train.max_staleness for i, step in trained)
    dropped = {i for d in r.drops for i in d.items}
    assert not dropped & {i for i, _ in trained}
    # the hops of real stacks are off by default: none of their seams
    names = {name for _, _, name in r.seams}
    assert not names & {"ref_inputs", "ref_log_probs", "old_log_probs", "truncation_mask"}
    assert {d.reason for d in r.drops} <= {"stale"}
    # the waste counters end at the run summary's figures
    assert r.counters["stale_dropped"].last == summary.dropped_stale
    assert r.counters["groups_filtered"].last == 0 == summary.groups_filtered


HOPS = {
    "train.kl_coef": 0.05, "train.ppo_epochs": 2, "train.mini_batches": 2,
    "rollout.filter_zero_variance": True, "rollout.mask_truncated": True,
}


@pytest.mark.slow
def test_the_hops_of_real_stacks_show_as_their_seams(tmp_path: Path) -> None:
    """Reference + k3 KL, old-log-prob recompute, dynamic sampling, truncation masking."""
    # one turn, no forks, n = 4: binary scores, so whole groups often score alike
    cfg = build({"train.steps": 4, "train.groups_per_batch": 2, "rollout.n": 4,
                 "task.num_turns": 1, "task.fork_prob": 0.0, "train.synchronous": True,
                 "progress": False, **HOPS})
    with flowmap.tracing(str(tmp_path / "run")) as path:
        summary = run(cfg)
    r = flowmap.load(path)
    assert r.health.tracer_errors == 0
    seams = set(r.seams)
    assert ("batcher", "ref", "ref_inputs") in seams
    for k in (0, 1):
        rank = f"trainer/rank{k}"
        assert ("ref", rank, "ref_log_probs") in seams
        assert (rank, rank, "old_log_probs") in seams
    assert ("reward", "advantage", "truncation_mask") in seams
    # every trained leaf's reference log-probs reached its rank, once per step
    trained = sorted(i for h in r.hops if h.name == "micro_batch" for i in h.items)
    with_ref = sorted(i for h in r.hops if h.name == "ref_log_probs" for i in h.items)
    assert trained and with_ref == trained
    filtered = [d for d in r.drops if d.reason == "zero_variance"]
    assert summary.groups_filtered > 0 and filtered
    assert sum(len(d.items) for d in filtered) == summary.groups_filtered * 4
    assert summary.groups_trained == 4 * 2  # over-sampling kept every batch full
    assert {"kl", "groups_filtered", "truncated"} <= set(r.counters)
    assert r.counters["groups_filtered"].last == summary.groups_filtered
