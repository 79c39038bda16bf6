"""Perfetto export checked against the Chrome Trace Event format's rules."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import (
    RLRunSpec,
    ShardWriter,
    check_trace_rules,
    tensor,
    write_rl_run,
    write_two_owner_run,
)

import flowmap
from flowmap.reporters.perfetto import perfetto_trace, write_perfetto


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory):
    return flowmap.load(write_rl_run(str(tmp_path_factory.mktemp("rl") / "run"),
                                     RLRunSpec(hostile=True)))


@pytest.fixture(scope="module")
def trace(rl_run):
    return perfetto_trace(rl_run.view)


def test_the_rl_run_obeys_the_format_rules(trace):
    check_trace_rules(trace)


def test_one_named_track_per_owner_in_its_own_process(rl_run, trace):
    threads = {e["args"]["name"]: (e["pid"], e["tid"]) for e in trace["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert set(threads) == set(rl_run.owners)
    assert threads["rollout/1"][0] == 2001  # where its own counters were recorded
    assert threads["trainer/rank0"][0] == 3000
    assert threads["ready_buffer"][0] == 1000
    assert len({tid for _, tid in threads.values()}) == len(threads)
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs[1000] == "driver (pid 1000)"  # the process the program named


def test_an_unnamed_process_is_named_by_its_owners(tmp_path):
    path = write_two_owner_run(str(tmp_path / "run"), [(10, "rollout/0", "ready_buffer", "t", 64)])
    trace = perfetto_trace(flowmap.load(path).view)
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {1: "ready_buffer, rollout/0 (pid 1)"}  # not the script: `train.py (pid 1)`


def test_counters_carry_their_owners_tid(rl_run, trace):
    threads = {e["args"]["name"]: (e["pid"], e["tid"]) for e in trace["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert counters and all("tid" in e for e in counters)
    by_owner = {c.owner: c for c in rl_run.view.events.counter_samples if c.owner in threads}
    for owner, sample in by_owner.items():
        if threads[owner][0] == sample.pid:
            ev = next(e for e in counters if e["pid"] == sample.pid and e["name"].startswith(sample.name))
            assert ev["tid"] in {tid for o, (p, tid) in threads.items() if p == sample.pid}


def test_each_hop_is_two_slices_linked_by_a_flow(rl_run, trace):
    events = trace["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == 2 * len(rl_run.hops)
    flows = [e for e in events if e["ph"] == "s"]
    assert len(flows) == len(rl_run.hops)
    traj = next(e for e in slices if e["name"] == "trajectory → ready_buffer")
    args = traj["args"]
    assert args["seam"].endswith("-> ready_buffer : trajectory")
    assert args["transport"] == "pickle" and args["bytes"] > 0
    assert args["shapes"]["routed_experts"].startswith("int32[")
    assert args["dtypes"] == ["float32", "int32", "int64"]
    assert args["num_items"] == 1 and args["step"] == 0


def test_counters_marks_and_drops(rl_run, trace):
    events = trace["traceEvents"]
    counters = Counter(e["name"] for e in events if e["ph"] == "C")
    assert counters["ready_buffer_depth"] == 4
    assert counters["loss [trainer/rank0]"] == 4  # one name, two owners: told apart
    instants = Counter(e["name"] for e in events if e["ph"] == "i")
    assert instants["drop: stale"] == 3 and instants["weight_sync.begin"] == 4


def test_written_file_is_deterministic_json(tmp_path, rl_run):
    a = open(write_perfetto(rl_run.view, str(tmp_path / "a.json")), encoding="utf-8").read()
    b = open(write_perfetto(rl_run.view, str(tmp_path / "b.json")), encoding="utf-8").read()
    assert a == b
    assert json.loads(a) == json.loads(json.dumps(perfetto_trace(rl_run.view)))


def test_non_finite_counter_values_are_left_out(tmp_path):
    w = ShardWriter(os.path.join(tmp_path, "run", "h-1-0001.flowmap.jsonl"), 1)
    w.counter(1, "loss", float("nan"), "trainer")
    w.counter(2, "loss", 1.5, "trainer")
    w.close(3)
    trace = perfetto_trace(flowmap.load(str(tmp_path / "run")).view)
    check_trace_rules(trace)
    assert [e["args"]["value"] for e in trace["traceEvents"] if e["ph"] == "C"] == [1.5]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.sampled_from("abc"), st.sampled_from("abc")),
                min_size=1, max_size=40))
def test_bursts_of_hops_never_overlap_on_a_track(tmp_path_factory, hops):
    """GIVEN hops at arbitrary, often equal, instants WHEN exported THEN the rules still hold."""
    path = str(tmp_path_factory.mktemp("burst"))
    w = ShardWriter(os.path.join(path, "h-1-0001.flowmap.jsonl"), 1)
    for t, src, dst in sorted(hops):
        w.hop(t, src, dst, "x", [tensor("t", (2,))])
    w.close(100)
    check_trace_rules(perfetto_trace(flowmap.load(path).view))
