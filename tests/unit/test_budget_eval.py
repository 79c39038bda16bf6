"""Budgets applied to a traced run: per seam (each match on its own), counters, drops, total."""

from __future__ import annotations

import numpy as np
import pytest

import flowmap
from flowmap.check.budget_file import parse
from flowmap.check.budgets import evaluate, fmt_like, limit_label


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # Two rollout engines, 4 steps; step 3 carries a doubled trajectory (the peak step).
    path = str(tmp_path_factory.mktemp("runs") / "run")
    with flowmap.tracing(path):
        for s in range(4):
            flowmap.step(s)
            n = 2048 if s == 3 else 1024
            for engine in (0, 1):
                flowmap.hop(f"rollout/{engine}", "ready_buffer",
                            {"logprobs": np.zeros(n, np.float32), "ids": np.zeros(n, np.int64)},
                            name="trajectory", items=[f"{s}-{engine}"])
            flowmap.counter("staleness", s)
        flowmap.drop(["0-0"], "stale")
    return flowmap.load(path)


def results(run, text):
    return evaluate(run.view, parse(text, "b.yaml"))


def test_glob_applies_to_each_matching_seam(run):
    rs = results(run, "seams:\n  rollout/* -> ready_buffer:\n    max_bytes_per_hop: 20 KB\n")
    assert [(r.subject, r.status) for r in rs] == [
        ("rollout/0 -> ready_buffer : trajectory", "fail"),
        ("rollout/1 -> ready_buffer : trajectory", "fail"),
    ]
    assert rs[0].summary == "was limited to 20 KB (19.53 KiB) per hop but carried 24.00 KiB"
    assert rs[0].details[0] == "trajectory.ids int64 [1024..2048]: 16.00 KiB/hop at most"


def test_per_step_limit_reads_the_heaviest_step(run):
    # Mean is 15 KiB/step per engine, the peak step 24 KiB: 20 KiB passes on average only.
    rs = results(run, "seams:\n  rollout/0 -> ready_buffer:\n    max_bytes_per_step: 20 KiB\n")
    assert [r.status for r in rs] == ["fail"]
    assert rs[0].measured == 24576
    rs = results(run, "seams:\n  rollout -> ready_buffer:\n    max_hops_per_step: 1\n")
    assert [r.status for r in rs] == ["ok", "ok"]


def test_unmatched_address_is_a_warning(run):
    (r,) = results(run, "seams:\n  trainer -> driver:\n    max_bytes_per_hop: 1 KB\n")
    assert r.status == "warn" and "matches no seam" in r.summary


def test_counters(run):
    rs = results(run, "counters:\n  staleness: {max: 2, min: 0}\n  absent: {max: 1}\n")
    assert [(r.subject, r.check, r.status) for r in rs] == [
        ("counter staleness", "max <= 2", "fail"),
        ("counter staleness", "min >= 0", "ok"),
        ("counter absent", "max <= 1", "warn"),
    ]
    assert rs[0].summary == "max = 3 (limit: max <= 2)"


def test_dropped_items(run):
    # 8 items (2 engines x 4 steps), 1 dropped as stale: 12.5 %
    rs = results(run, "items:\n  max_dropped: 15 %\n  max_dropped_by_reason: {stale: 0}\n")
    assert [(r.subject, r.status) for r in rs] == [("items dropped", "ok"), ("items dropped (stale)", "fail")]
    assert rs[0].summary == "1 of 8 items dropped (12 %; limit 15 %)"
    assert rs[1].summary == "1 of 8 items dropped (12 %; limit 0)"
    (r,) = results(run, "items:\n  max_dropped: 10 %\n")
    assert r.status == "fail"


def test_total(run):
    (r,) = results(run, "total:\n  max_bytes_per_step: 40 KiB\n")
    assert r.status == "fail" and r.measured == 2 * 24576


def test_sizes_read_in_one_unit_family_whatever_the_limit_says():
    assert fmt_like(65536, "64 KB") == "64.00 KiB"
    assert fmt_like(65536, "64 KiB") == "64.00 KiB"
    assert limit_label("64 KB", 64000) == "64 KB (62.50 KiB)"
    assert limit_label("64 KiB", 65536) == "64 KiB"
