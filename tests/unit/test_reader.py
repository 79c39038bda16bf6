"""Reading shards: truncated files load their prefix; foreign files are refused in one line."""

from __future__ import annotations

import json
import os

import pytest

import flowmap
from flowmap.errors import NotATrace
from flowmap.model.run import newest_run


def make_run(path, hops=50):
    with flowmap.tracing(path):
        for i in range(hops):
            flowmap.hop("a", "b", {"x": bytes(100 + i)}, name="p", items=[i], step=i // 10)
    (shard,) = [p for p in path.iterdir() if p.name.endswith(".jsonl")]
    return shard


def test_a_cut_shard_loads_its_prefix_and_says_so(tmp_path):
    shard = make_run(tmp_path / "run")
    data = shard.read_bytes()
    cut = data[: len(data) * 2 // 3]
    cut = cut[: cut.rfind(b"\n") + 1] + b'["h",12,0,1,'  # a partial last line
    shard.write_bytes(cut)
    run = flowmap.load(tmp_path / "run")
    assert run.truncated
    assert 0 < len(run.hops) < 50
    assert run.health.truncated_shards == (shard.name,)
    assert [h.items[0] for h in run.hops] == list(range(len(run.hops)))


def test_random_bytes_are_not_a_trace(tmp_path):
    p = tmp_path / "junk"
    p.write_bytes(os.urandom(4096))
    with pytest.raises(NotATrace, match="not a flowmap trace"):
        flowmap.load(p)


def test_a_newer_schema_is_refused_with_advice(tmp_path):
    p = tmp_path / "future.flowmap.jsonl"
    p.write_text(json.dumps({"flowmap": "trace", "schema": 99}) + "\n")
    with pytest.raises(NotATrace, match="upgrade flowmap"):
        flowmap.load(p)


def test_an_empty_directory_is_not_a_run(tmp_path):
    with pytest.raises(NotATrace, match="no flowmap shards"):
        flowmap.load(tmp_path)


def test_aggregates_per_seam(tmp_path):
    make_run(tmp_path / "run")
    run = flowmap.load(tmp_path / "run")
    (s,) = run.seams.values()
    assert s.hops == 50 and run.num_steps == 5
    assert s.total_bytes == sum(100 + i for i in range(50))
    assert s.max_bytes == 149 and s.p50_bytes == 124
    assert s.bytes_per_step_mean == s.total_bytes / 5
    assert s.bytes_per_step_max == sum(100 + i for i in range(40, 50))
    assert s.leaves[0].shape == ((100, 149),)


def test_residency_measures_time_at_the_destination(tmp_path):
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop("rollout", "ready_buffer", 1, name="t", items=["a", "b"])
        flowmap.hop("ready_buffer", "batcher", 1, name="t", items=["a"])
        with flowmap.owner("ready_buffer"):
            flowmap.drop(["b"], "stale")
    run = flowmap.load(tmp_path / "run")
    s = run.seams[("rollout", "ready_buffer", "t")]
    assert s.residency_max_s is not None and s.residency_max_s >= 0
    assert run.items.total == 2 and run.items.consumed == 1 and run.items.dropped == {"stale": 1}


def test_newest_run_is_found(tmp_path, monkeypatch):
    make_run(tmp_path / "flowmap-runs" / "old", hops=1)
    make_run(tmp_path / "flowmap-runs" / "new", hops=1)
    os.utime(tmp_path / "flowmap-runs" / "old", (1, 1))
    for p in (tmp_path / "flowmap-runs" / "old").iterdir():
        os.utime(p, (1, 1))
    assert os.path.basename(newest_run(str(tmp_path))) == "new"
