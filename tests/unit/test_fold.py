"""`trace --aggregate`, in process: folded figures equal a full trace's, and the trace
grows with seams x steps, not with hops."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
from fuzz_shards import assert_no_verb_raises, make_run, mutate, shard_of
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from seam_figures import detail_hops, read_run_shards, seam_figures, seam_steps

import flowmap
from flowmap import trace_format as tf
from flowmap.capture import fold

FUZZ = settings(max_examples=15, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def aggregated(tmp_path_factory):
    """(shard bytes, baseline path) of a real run with `a` events and hostile names."""
    d = tmp_path_factory.mktemp("aggregated")
    run = make_run(str(d / "run"), hops=80, aggregate=1)
    assert b'\n["a",' in open(shard_of(run), "rb").read()
    from flowmap.cli.main import main

    assert main(["baseline", run, "-o", str(d / "base.json")]) == 0
    return open(shard_of(run), "rb").read(), str(d / "base.json")


def workload(steps: int, per_step: int = 8) -> None:
    """Deterministic: several seams, shapes that vary within a step, items, versions."""
    @flowmap.seam("reward")
    def score(batch: dict) -> list[float]:
        return [0.5] * len(batch["ids"])

    for s in range(steps):
        flowmap.step(s)
        for i in range(per_step):
            n = 4 + (s * 7 + i * 3) % 13
            batch = {"tokens": np.zeros((n, 16), np.int32), "ids": list(range(n)),
                     "text": ["x" * (1 + (i + k) % 5) for k in range(n)]}
            flowmap.hop("rollout/0", "buffer", batch, name="batch", items=list(range(i, i + n)))
            with flowmap.owner("trainer/0"):
                score(batch)
            flowmap.hop("buffer", "trainer/0", batch["tokens"], name="tokens", step=s)
        flowmap.hop("trainer/0", "rollout/0", {"w": np.zeros(64 + s % 3, np.float32)},
                    name="weights", version=s, transport="copy")


def trace(path, steps: int, per_step: int = 8, aggregate: int | None = None) -> str:
    with flowmap.tracing(str(path), children=False, aggregate=aggregate):
        workload(steps, per_step)
    return str(path)


@pytest.mark.parametrize("detail", [0, 2])
def test_folded_figures_equal_the_full_trace(tmp_path, detail):
    full = seam_figures(trace(tmp_path / "full", 12))
    agg_run = trace(tmp_path / "agg", 12, aggregate=detail)
    agg = seam_figures(agg_run)
    assert set(agg) == set(full) and len(full) == 5
    for seam in full:
        assert agg[seam] == full[seam], seam
    # the detail window is written hop by hop, the rest folded, one record per seam-step
    assert {h.step for h in detail_hops(agg_run)} == set(range(detail))
    folded = seam_steps(agg_run)
    assert {s.step for s in folded} == set(range(detail, 12))
    assert len(folded) == len({(s.seam, s.step, s.transport) for s in folded}) == 5 * (12 - detail)


def test_trace_bytes_grow_with_seam_steps_not_hops(tmp_path):
    sizes = {}
    for per_step in (4, 40):
        run = trace(tmp_path / f"agg{per_step}", 60, per_step, aggregate=2)
        (shard,) = [os.path.join(run, n) for n in os.listdir(run) if n.endswith(tf.SHARD_SUFFIX)]
        lines = open(shard, "rb").read().split(b"\n")
        last_hop = max(i for i, line in enumerate(lines) if line.startswith(b'["h",'))
        after = sum(len(line) + 1 for line in lines[last_hop + 1:])
        seam_step_count = len({(s.seam, s.step) for s in seam_steps(run)})
        assert seam_step_count == 5 * 58
        sizes[per_step] = after / seam_step_count
        assert sizes[per_step] <= 200, sizes
    # ten times the hops: the folded part of the trace grows by a few digits, not tenfold
    assert sizes[40] < sizes[4] * 1.15, sizes
    full = trace(tmp_path / "full", 60, 40)
    full_bytes = sum(os.path.getsize(os.path.join(full, n)) for n in os.listdir(full))
    agg_bytes = sum(os.path.getsize(os.path.join(tmp_path / "agg40", n))
                    for n in os.listdir(tmp_path / "agg40"))
    assert agg_bytes * 10 < full_bytes, (agg_bytes, full_bytes)


def test_a_process_without_steps_writes_every_flush_hops(tmp_path, monkeypatch):
    monkeypatch.setattr(fold, "FLUSH_HOPS", 50)
    monkeypatch.setattr(fold, "STEPLESS_HOPS_PER_STEP", 10)
    sizes = [8 + i % 11 for i in range(500)]
    for run, aggregate in (("full", None), ("agg", 1)):
        with flowmap.tracing(str(tmp_path / run), children=False, aggregate=aggregate):
            for n in sizes:
                flowmap.hop("engine", "driver", b"x" * n, name="out", items=[n])
    folded = seam_steps(tmp_path / "agg")
    assert len(detail_hops(tmp_path / "agg")) == 10
    assert [s.hops for s in folded] == [50] * 9 + [40]  # the last forty at close
    assert all(s.step is None for s in folded)
    assert seam_figures(tmp_path / "agg") == seam_figures(tmp_path / "full")


def test_an_old_step_folds_apart_and_a_newer_one_is_a_boundary(tmp_path):
    with flowmap.tracing(str(tmp_path / "run"), children=False, aggregate=0):
        flowmap.hop("a", "b", b"x" * 10, name="n", step=5)
        flowmap.hop("a", "b", b"x" * 20, name="n", step=3)  # late: off-policy
        flowmap.hop("a", "b", b"x" * 30, name="n", step=5)
        flowmap.hop("a", "b", b"x" * 40, name="n", step=6)  # newer: step 5 is written now
        shard = [n for n in os.listdir(tmp_path / "run") if n.endswith(tf.SHARD_SUFFIX)][0]
        written = open(tmp_path / "run" / shard, "rb").read()
        assert written.count(b'\n["a",') == 2  # steps 5 and 3, before close
    got = sorted((s.step, s.hops, s.nbytes_sum, s.nbytes_min, s.nbytes_max)
                 for s in seam_steps(tmp_path / "run"))
    assert got == [(3, 1, 20, 20, 20), (5, 2, 40, 10, 30), (6, 1, 40, 40, 40)]


def test_the_schema_merges_dims_into_ranges_and_is_written_once(tmp_path):
    with flowmap.tracing(str(tmp_path / "run"), children=False, aggregate=0):
        for s in range(20):
            flowmap.step(s)
            for n in (3, 9, 5):
                flowmap.hop("a", "b", {"x": np.zeros((n, 4), np.float32)}, name="n")
    folded = seam_steps(tmp_path / "run")
    assert len(folded) == 20
    assert {tuple(leaf.shape) for s in folded for leaf in s.leaves} == {((3, 9), 4)}
    assert all(s.nbytes_min == 48 and s.nbytes_max == 144 for s in folded)
    shard = [n for n in os.listdir(tmp_path / "run") if n.endswith(tf.SHARD_SUFFIX)][0]
    schemas = [line for line in open(tmp_path / "run" / shard, "rb") if line.startswith(b'["S",')]
    assert len(schemas) == 1, schemas  # the range is reached in step 0 and interned once


def test_merge_of_leaves():
    assert fold._merge_dim(3, 3) == 3
    assert fold._merge_dim(3, 7) == (3, 7)
    assert fold._merge_dim((2, 5), 7) == (2, 7)
    assert fold._merge_dim((2, 5), (1, 3)) == (1, 5)
    a = ("x", "tensor", (4, (1, 2)), "float32", "cpu", 32, 1, None)
    b = ("x", "tensor", (6, 2), "float32", "cpu", 48, 1, None)
    assert fold._merge_leaf(a, b) == ("x", "tensor", ((4, 6), (1, 2)), "float32", "cpu", 48, 1,
                                      None)
    c = ("x", "tensor", (6,), "int64", "cpu", 8, 1, None)  # another dtype and rank: kept as was
    assert fold._merge_leaf(a, c) == ("x", "tensor", (4, (1, 2)), "float32", "cpu", 32, 1, None)


def test_run_json_records_the_detail_window(tmp_path):
    trace(tmp_path / "agg", 1, aggregate=4)
    meta = json.load(open(tmp_path / "agg" / tf.RUN_META))
    assert meta["aggregate"] is True and meta["detail_steps"] == 4
    trace(tmp_path / "full", 1)
    assert "aggregate" not in json.load(open(tmp_path / "full" / tf.RUN_META))
    with pytest.raises(ValueError, match="count of steps"):
        with flowmap.tracing(str(tmp_path / "bad"), aggregate=-1):
            pass


def test_a_bad_aggregate_line_is_skipped_and_counted(tmp_path):
    run = trace(tmp_path / "agg", 6, 2, aggregate=1)
    (name,) = [n for n in os.listdir(run) if n.endswith(tf.SHARD_SUFFIX)]
    path = os.path.join(run, name)
    lines = open(path, "rb").read().split(b"\n")
    at = [i for i, line in enumerate(lines) if line.startswith(b'["a",')]
    before = len(seam_steps(run))
    bad = [json.loads(lines[i]) for i in at[:4]]
    bad[0][2] = 99_999  # a string never interned
    bad[1][8] = -1  # a negative count of hops
    bad[2][9] = 10**400  # bytes past any bound
    bad[3] = bad[3][:10]  # cut short
    for i, ev in zip(at, bad):
        lines[i] = json.dumps(ev).encode()
    open(path, "wb").write(b"\n".join(lines))
    shards, problems = read_run_shards(run)
    assert len(seam_steps(run)) == before - 4
    assert shards[0].bad_lines == 4 and "4 bad line(s) skipped" in problems[0]


def test_collective_hops_fold_with_the_bytes_the_transport_moved(tmp_path):
    from flowmap.capture.describe import describe
    from flowmap.integrations.transports import record

    with flowmap.tracing(str(tmp_path / "run"), children=False, aggregate=0):
        flowmap.step(0)
        for i in range(5):
            record.hop("rank0", "group:world", "all_reduce", describe(np.zeros(4)), 100 + i,
                       "collective", record.now_ns())
    assert not detail_hops(tmp_path / "run")
    got = [(s.seam, s.step, s.hops, s.nbytes_sum, s.nbytes_max, s.transport)
           for s in seam_steps(tmp_path / "run")]
    assert got == [(("rank0", "group:world", "all_reduce"), 0, 5, 510, 104, "collective")]


@FUZZ
@given(seed=st.integers(0, 2**32 - 1))
def test_no_corrupt_aggregated_shard_makes_a_verb_raise(seed, aggregated, tmp_path_factory):
    data, baseline = aggregated
    mutant = mutate(data, random.Random(seed))
    note(mutant.how)
    assert_no_verb_raises(mutant.shard, baseline, str(tmp_path_factory.mktemp("m")))


def test_a_forked_child_folds_with_its_parents_window(tmp_path):
    from flowmap.capture import session

    with flowmap.tracing(str(tmp_path / "run"), children=False, aggregate=1):
        pid = os.fork()
        if pid == 0:  # the child: its own shard, its own detail window of one step
            try:
                for s in range(4):
                    flowmap.step(s)
                    for i in range(3):
                        flowmap.hop("worker", "driver", b"x" * (i + 1), name="n")
                session.stop()
            finally:
                os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
    shards, _ = read_run_shards(str(tmp_path / "run"))
    (child,) = [sh for sh in shards if sh.pid == pid]
    assert [h.step for h in child.hops] == [0, 0, 0]
    assert [(s.step, s.hops, s.nbytes_sum) for s in child.seam_steps] == [(1, 3, 6), (2, 3, 6),
                                                                          (3, 3, 6)]


def test_tracing_without_aggregate_writes_every_hop_whatever_the_environment(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv(fold.ENV, "0")  # left by an aggregated `flowmap trace` in this process
    with flowmap.tracing(str(tmp_path / "run"), children=False):
        flowmap.step(0)
        flowmap.hop("a", "b", b"xy", name="n")
    assert len(detail_hops(tmp_path / "run")) == 1 and not seam_steps(tmp_path / "run")


def test_a_long_stepless_prefix_still_leaves_the_first_steps_in_detail(tmp_path, monkeypatch):
    monkeypatch.setattr(fold, "STEPLESS_HOPS_PER_STEP", 10)
    with flowmap.tracing(str(tmp_path / "run"), children=False, aggregate=1):
        for _ in range(30):  # warm-up before any step: 10 in full, 20 folded
            flowmap.hop("loader", "driver", b"x" * 4, name="warmup")
        for s in range(3):
            flowmap.hop("driver", "trainer", b"x" * 8, name="batch", step=s)  # ahead of step()
            flowmap.step(s)
            flowmap.hop("driver", "trainer", b"x" * 8, name="batch")
    hops = [(h.name, h.step) for h in detail_hops(tmp_path / "run")]
    assert hops == [("warmup", None)] * 10 + [("batch", 0)] * 2
    got = sorted((s.name, s.step, s.hops) for s in seam_steps(tmp_path / "run"))
    assert got == [("batch", 1, 2), ("batch", 2, 2), ("warmup", None, 20)]  # one per seam-step


def noisy(steps: int, per_step: int) -> None:
    """A counter sampled at every hop, a marker per hop, drops: all of them grow with hops."""
    for s in range(steps):
        flowmap.step(s)
        flowmap.mark("step.begin")  # once a step: its own line even when folded
        for i in range(per_step):
            flowmap.hop("rollout/0", "buffer", b"x" * (10 + i), name="sample", items=[i])
            flowmap.counter("depth", (s * 7 + i * 3) % 11 + 0.25)
            flowmap.mark("push")
            if i % 4 == 0:
                flowmap.drop([i, i + 1, i + 2][: 1 + i % 3], reason="stale")
        flowmap.counter("loss", 1.0 / (s + 1))


def test_counters_marks_and_drops_fold_to_the_full_figures(tmp_path):
    for name, aggregate in (("full", None), ("agg", 1)):
        with flowmap.tracing(str(tmp_path / name), children=False, aggregate=aggregate):
            noisy(10, 12)
    full, agg = flowmap.load(str(tmp_path / "full")), flowmap.load(str(tmp_path / "agg"))
    assert set(full.counters) == set(agg.counters) == {"depth", "loss"}
    for name in full.counters:
        f, a = full.counters[name], agg.counters[name]
        assert (a.count, a.min, a.max, a.last, a.owners) == (f.count, f.min, f.max, f.last,
                                                              f.owners)
        assert a.mean == pytest.approx(f.mean, rel=1e-12)
    # one series point per folded step, where a fold holds more than one sample
    assert len(agg.counters["depth"].series) == 12 + 9  # step 0 in detail
    assert len(agg.counters["loss"].series) == 10  # one sample a step: written as it was
    shards, _ = read_run_shards(str(tmp_path / "agg"))
    (sh,) = shards
    marks = {(m.name, m.step): m.count for m in sh.mark_folds}
    assert marks == {("push", s): 12 for s in range(1, 10)}
    assert sum(1 for m in sh.marks if m.name == "step.begin") == 10
    drops = sorted((d.step, d.count, d.num_items) for d in sh.drop_folds)
    assert drops == [(s, 3, 1 + 2 + 3) for s in range(1, 10)]
    assert sum(len(d.items) for d in sh.drops) == 6  # the detail window, ids and all
    # Perfetto draws them: a marker instant per fold, a drop instant with its counts
    from flowmap.model.view import build_view
    from flowmap.reporters.perfetto import perfetto_trace

    events = perfetto_trace(build_view(agg))["traceEvents"]
    assert sum(e.get("name") == "push (x12)" for e in events) == 9
    assert sorted(e["args"]["num_items"] for e in events if e.get("cat") == "drop") == \
        [1, 2, 3] + [6] * 9
    assert len([e for e in events if e.get("ph") == "C" and e["name"] == "depth"]) == 21


def test_counters_and_marks_per_hop_keep_the_trace_within_the_seam_step_bound(tmp_path):
    sizes = {}
    for per_step in (10, 100):
        run = tmp_path / f"agg{per_step}"
        with flowmap.tracing(str(run), children=False, aggregate=1):
            noisy(40, per_step)
        (shard,) = [run / n for n in os.listdir(run) if n.endswith(tf.SHARD_SUFFIX)]
        lines = open(shard, "rb").read().split(b"\n")
        last_detail = max(i for i, line in enumerate(lines)
                          if line.startswith((b'["h",', b'["d",')))
        after = sum(len(line) + 1 for line in lines[last_detail + 1:])
        # per step: one seam, one counter and one marker folded, one drop fold, and the
        # lines that are per step anyway (the step, its marker and loss)
        sizes[per_step] = after / 39
        assert sizes[per_step] <= 5 * 200, sizes
    assert sizes[100] < sizes[10] * 1.15, sizes


def test_the_sink_is_chosen_once_and_says_when_detail_ends(tmp_path):
    # GIVEN tracing without --aggregate: every event streams, whatever the step
    from flowmap.capture import state
    from flowmap.capture.sink import STREAM

    with flowmap.tracing(str(tmp_path / "plain"), children=False):
        for s in range(4):
            flowmap.step(s)
        assert state.tracer.sink is STREAM and not state.tracer.sink.past_detail()
    # AND with a detail window of 1 step: the folder, past its window from the 2nd step on
    with flowmap.tracing(str(tmp_path / "agg"), children=False, aggregate=1):
        sink = state.tracer.sink
        assert isinstance(sink, fold.ProcessFolder) and not sink.past_detail()
        flowmap.step(0)
        assert not sink.past_detail()
        flowmap.step(1)
        assert sink.past_detail()
