"""A long run read past its detail window: hops folded per seam and step while reading.

Every per-seam figure must equal what holding every hop gives (hops, total,
smallest and largest bytes, bytes per step), memory must be bounded by
seams x steps plus the window (shown as sizes, not times), and every output
must read a run made of folded steps.
"""

from __future__ import annotations

import json
import os

import pytest
import runs
from seam_figures import read_run_shards

from flowmap.check.compare import compare
from flowmap.check.diff import diff_snapshots
from flowmap.check.snapshot import from_run
from flowmap.check.tolerance import DEFAULT_TOLERANCE
from flowmap.model.run import Run, load
from flowmap.read.fold import FINISH_STEP_FACTOR, fold_hops
from flowmap.read.shards import shard_paths
from flowmap.read.tail import ShardTail
from flowmap.reporters.html import write_html
from flowmap.reporters.json_document import report_document
from flowmap.reporters.perfetto import perfetto_trace
from flowmap.reporters.terminal import report_lines

EXACT = ("hops", "total_bytes", "min_bytes", "max_bytes", "bytes_per_step_mean",
         "bytes_per_step_max", "hops_per_step", "hops_per_step_max", "transports", "items",
         "first_t_ns", "last_t_ns")


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A five-process GRPO-shaped run of 40 steps: 1,241 hops, varied sizes and transports."""
    return runs.write_rl_run(str(tmp_path_factory.mktemp("long")), runs.RLRunSpec(steps=40))


@pytest.fixture(scope="module")
def full(long_run: str) -> Run:
    return load(long_run, detail_hops=None)


@pytest.fixture(scope="module")
def folded(long_run: str) -> Run:
    return load(long_run, detail_hops=300)


def assert_same_seam_figures(a: Run, b: Run) -> None:
    assert list(a.seams) == list(b.seams)  # same seams, same (heaviest-first) order
    for key, s in a.seams.items():
        o = b.seams[key]
        assert {f: getattr(s, f) for f in EXACT} == {f: getattr(o, f) for f in EXACT}, key
        assert [leaf.path for leaf in s.leaves] == [leaf.path for leaf in o.leaves]
        assert [leaf.max_bytes for leaf in s.leaves] == [leaf.max_bytes for leaf in o.leaves]
        assert sum(leaf.total_bytes for leaf in o.leaves) == pytest.approx(o.total_bytes, abs=len(
            o.leaves) * len(o.folded_bytes))  # each folded step's share is rounded once a leaf


def test_folding_while_reading_keeps_every_per_seam_figure(full: Run, folded: Run) -> None:
    assert folded.seam_steps and not full.seam_steps
    assert len(folded.hops) < len(full.hops) / 3
    assert folded.num_hops == full.num_hops == len(full.hops)
    assert folded.steps == full.steps
    assert_same_seam_figures(full, folded)
    assert folded.view.totals == full.view.totals
    assert folded.owners == full.owners
    a, b = full.view.step_bins(16), folded.view.step_bins(16)
    assert (a.bytes, a.hops) == (b.bytes, b.hops)
    for pipe in ("pipeline", "roles"):
        pa, pb = getattr(full.view, pipe), getattr(folded.view, pipe)
        assert [(e.seam.key, e.seam.hops, e.seam.total_bytes) for e in pa.edges] == [
            (e.seam.key, e.seam.hops, e.seam.total_bytes) for e in pb.edges]


def test_the_detail_window_is_one_window_for_every_process(full: Run, folded: Run) -> None:
    detail = folded.view.detail
    assert detail.folded and detail.hops == len(folded.hops)
    assert detail.hops + detail.folded_hops == len(full.hops)
    assert detail.steps == tuple(full.steps[: len(detail.steps)]) and detail.steps
    for step in detail.steps:  # each step of the window is whole, in every process
        kept = sorted((h.pid, h.seam, h.nbytes) for h in folded.hops if h.step == step)
        assert kept == sorted((h.pid, h.seam, h.nbytes) for h in full.hops if h.step == step)
    assert not any(st.step in detail.steps for st in folded.seam_steps)
    assert not full.view.detail.folded and full.view.detail.note == ""


def test_memory_is_bounded_by_seams_times_steps_plus_the_window(long_run: str,
                                                                 tmp_path: str) -> None:
    budget = 100
    for path in shard_paths(long_run):
        whole, shard = ShardTail(path, None).finish(), ShardTail(path, budget).finish()
        assert len(shard.hops) <= FINISH_STEP_FACTOR * budget
        cells = {(h.seam, h.step, h.transport) for h in whole.hops}
        assert len(shard.seam_steps) <= len(cells)
        assert len(shard.hops) + sum(st.hops for st in shard.seam_steps) == len(whole.hops)
    # ten times the steps: the same window, ten times the folded records, no more hops
    bigger = runs.write_rl_run(os.path.join(tmp_path, "x10"), runs.RLRunSpec(steps=400))
    small, large = load(long_run, detail_hops=budget), load(bigger, detail_hops=budget)
    assert len(large.hops) <= len(small.hops) + FINISH_STEP_FACTOR * budget
    assert len(large.seam_steps) <= 11 * len(small.seam_steps)
    assert large.num_hops > 9 * small.num_hops


def test_a_small_run_is_read_exactly_as_before(long_run: str, full: Run) -> None:
    default = load(long_run)  # 1,241 hops: far inside the default window
    assert not default.seam_steps and len(default.hops) == len(full.hops)
    assert report_document(default.view) == report_document(full.view)


def test_every_output_reads_a_folded_run(full: Run, folded: Run, tmp_path: str) -> None:
    view = folded.view
    doc = json.loads(json.dumps(report_document(view)))
    whole = report_document(full.view)
    assert doc["detail"]["hops"] == len(folded.hops) and "detail" not in whole
    assert [(s["hops"], s["total_bytes"], s["max_bytes"]) for s in doc["seams"]] == [
        (s["hops"], s["total_bytes"], s["max_bytes"]) for s in whole["seams"]]
    text = "\n".join(line for line, _ in report_lines(view, 120))
    assert "detail window" in text and "detail window" not in "\n".join(
        line for line, _ in report_lines(full.view, 120))
    html = os.path.join(tmp_path, "folded.html")
    write_html(view, html)
    assert "detail window" in open(html, encoding="utf-8").read()
    snap, base = from_run(view), from_run(full.view)
    assert {k: (s.bytes_per_step, s.max_bytes_per_hop, s.hops_per_step) for k, s in snap.seams.items()
            } == {k: (s.bytes_per_step, s.max_bytes_per_hop, s.hops_per_step)
                  for k, s in base.seams.items()}
    # seam figures are exact; a leaf's share of a folded step whose sizes varied is not
    assert not [r for r in compare(snap, base, DEFAULT_TOLERANCE) if r.failed]
    assert all(d.delta_bytes_per_step == 0 for d in diff_snapshots(base, snap))
    trace = perfetto_trace(view)
    runs.check_trace_rules(trace)
    slices = [e for e in trace["traceEvents"] if e.get("cat") == "folded"]
    assert sum(e["args"]["hops"] for e in slices) == view.detail.folded_hops
    assert sum(e["args"]["bytes"] for e in slices) == sum(st.nbytes_sum for st in folded.seam_steps)


def test_a_run_of_seam_steps_alone_has_the_full_figures(long_run: str, full: Run) -> None:
    """As `flowmap trace --aggregate` writes past its window: no hops, only folded steps."""
    shards, problems = read_run_shards(long_run, None)
    for sh in shards:
        sh.seam_steps, sh.hops = fold_hops(sh.hops), []
    folded_only = Run(long_run, shards, {}, problems)
    assert not folded_only.hops and folded_only.num_hops == len(full.hops)
    assert_same_seam_figures(full, folded_only)
    assert folded_only.view.totals == full.view.totals
    view = folded_only.view
    assert view.detail.folded and view.detail.hops == 0 and view.detail.steps == ()
    assert report_document(view)["detail"]["folded_hops"] == len(full.hops)
    assert any("detail window" in line for line, _ in report_lines(view, 100))
    runs.check_trace_rules(perfetto_trace(view))
    html = os.path.join(long_run, "folded-only.html")
    try:
        write_html(view, html)
        assert os.path.getsize(html) > 0
    finally:
        os.remove(html)
    snap, base = from_run(view), from_run(full.view)
    assert {k: (s.bytes_per_step, s.max_bytes_per_hop) for k, s in snap.seams.items()} == {
        k: (s.bytes_per_step, s.max_bytes_per_hop) for k, s in base.seams.items()}
    assert all(d.delta_bytes_per_step == 0 for d in diff_snapshots(base, snap))


def test_a_batch_with_escaped_surrogates_folds_the_same(tmp_path: str) -> None:
    """Such a batch is read event by event (the slow path): it must fold like the fast one."""
    w = runs.ShardWriter(os.path.join(tmp_path, "h-1-0001.flowmap.jsonl"), 1, "odd")
    for i in range(600):
        if i % 20 == 0:
            w.step(i * 10, i // 20)
        w.hop(i * 10, "a\udc80", "b", "x", [runs.tensor("t", (i % 5 + 1,))], step=i // 20,
              items=[i])
    w.close(6000)
    whole, folded = load(str(tmp_path), detail_hops=None), load(str(tmp_path), detail_hops=50)
    assert len(folded.hops) < 100 and folded.seam_steps
    assert_same_seam_figures(whole, folded)


def test_load_keeps_the_readers_detail_window_by_default() -> None:
    import flowmap
    from flowmap.read import fold

    assert flowmap.DETAIL_HOPS == fold.DETAIL_HOPS
