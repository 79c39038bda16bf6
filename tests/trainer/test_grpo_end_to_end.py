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
            "staleness_max", "reward_mean", "loss"}


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
