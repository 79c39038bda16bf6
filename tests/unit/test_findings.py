"""Findings on hand-built runs: each kind fires where it should, with the bytes it should."""

from __future__ import annotations

import io
import json
import os

import pytest
from rich.console import Console
from runs import RLRunSpec, ShardWriter, tensor, write_rl_run, write_two_owner_run

import flowmap
from flowmap.findings import KINDS, Finding, findings, heaviest
from flowmap.reporters.json_document import report_document
from flowmap.reporters.terminal import print_report


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory):
    return flowmap.load(write_rl_run(str(tmp_path_factory.mktemp("rl") / "run")))


@pytest.fixture(scope="module")
def found(rl_run):
    return findings(rl_run.view)


def _of(found, kind):
    return [f for f in found if f.kind == kind]


def test_findings_are_ranked_by_bytes_per_step_and_cover_every_kind(found):
    assert [f.bytes_per_step for f in found] == sorted((f.bytes_per_step for f in found),
                                                       reverse=True)
    # every kind of this run's patterns fires; `heaviest` only by its detector here, as the
    # seams it names carry other findings too (see
    # test_a_heaviest_finding_that_repeats_another_is_dropped); the kinds that need a run of
    # their own (views, chatty seams, resent prefixes, wide ids, large pickles) are in
    # test_findings_field.py and below, device bounces in test_device_bounce.py; messages never
    # received in tests/integration/test_field_identity.py
    assert {f.kind for f in found} | {"heaviest"} == set(KINDS) - {
        "view", "chatty", "prefix_resend", "wide_ids", "serialisation", "device_bounce", "unreceived"}
    for f in found:
        assert f.bytes_per_step > 0 and f.seams == sorted(f.seams)
        assert f.message.count(". ") == 0 and f.message.endswith(".")  # one sentence


def test_heaviest_is_silent_on_float32_seams_however_heavy(rl_run):
    # GIVEN a run whose heavy seams carry float32 and integer leaves: a seam being heavy names
    # no change and no bytes (it used to say "a handle, a narrower dtype or fewer rows")
    assert rl_run.view.seams and heaviest.detect(rl_run.view) == []


def test_findings_are_not_repeated(found):
    assert len({(f.kind, tuple(f.seams)) for f in found}) == len(found)


def test_heaviest_names_float64_leaves_and_prices_float32(tmp_path):
    # GIVEN a pickled payload of 8 KiB float64 logprobs and 4 KiB int64 ids, two steps
    os.makedirs(tmp_path / "run")
    w = ShardWriter(str(tmp_path / "run" / "h-1-0001.flowmap.jsonl"), 1)
    for s in range(2):
        w.hop(10 + s, "a", "b", "batch", [tensor("logprobs", (1024,), "float64"),
                                          tensor("ids", (512,), "int64")],
              step=s, transport="pickle")
    w.close(20)
    (f,) = heaviest.detect(flowmap.load(str(tmp_path / "run")).view)
    # THEN at stake: half the float64 bytes, 8,192 / 2 = 4,096 B a step; the ids are not counted
    assert f.seams == ["a -> b : batch"] and f.bytes_per_step == 4096
    assert "`batch.logprobs` (float64[1024])" in f.message and "ids" not in f.message
    assert "8.00 KiB/step of float64" in f.message and "4.00 KiB/step" in f.message


def test_pass_through_by_storage_at_the_ready_buffer(rl_run, found):
    (f,) = [f for f in _of(found, "pass_through") if "ready_buffer ->" in " ".join(f.seams)]
    assert f.seams == ["ready_buffer -> batcher : trajectory",
                       "rollout/0 -> ready_buffer : trajectory",
                       "rollout/1 -> ready_buffer : trajectory"]
    onward = rl_run.seams[("ready_buffer", "batcher", "trajectory")]
    assert f.bytes_per_step == onward.bytes_per_step_mean
    assert "same storage" in f.message and "rollout -> batcher" in f.message


def test_pass_through_by_schema_at_weight_sync(found):
    (f,) = [f for f in _of(found, "pass_through") if "weight_sync" in f.message]
    assert "same leaf schema" in f.message and f.bytes_per_step == 32 * 1024


def test_a_stage_that_adds_leaves_is_not_a_pass_through(found):
    passed = _of(found, "pass_through")
    assert passed, "the run has pass-throughs (ready_buffer, weight_sync): the detector must run"
    assert all("reward -> advantage : batch" not in f.seams for f in passed)


def test_dropped_bytes_are_the_hops_that_carried_the_stale_items(rl_run, found):
    (f,) = _of(found, "dropped")
    stale = {i for d in rl_run.drops for i in d.items}
    assert len(stale) == 3
    spent = sum(h.nbytes / len(h.items) for h in rl_run.hops for i in h.items if i in stale)
    assert f.bytes_per_step == pytest.approx(spent / rl_run.num_steps)
    assert "`stale` at ready_buffer" in f.message and f.message.startswith("3 items")


def test_duplicate_copies_of_one_batch_to_every_rank(rl_run, found):
    (f,) = [f for f in _of(found, "duplicate") if "advantage" in f.message]
    one_rank = rl_run.seams[("advantage", "trainer/rank1", "micro_batch")]
    assert f.bytes_per_step == one_rank.bytes_per_step_mean
    assert f.seams == ["advantage -> trainer/rank0 : micro_batch",
                       "advantage -> trainer/rank1 : micro_batch"]


def test_serialisation_leaves_out_small_pickles_shared_memory_and_collectives(found):
    # the fixture pickles 12 KiB trajectories, sends 32 KiB weights by rpc and 72 B
    # requests, moves micro-batches through shared memory and state by collective: none is
    # a serialisation cost (each pickle is less than a message's own cost)
    assert not _of(found, "serialisation")


def _pickled_run(tmp_path, leaves, transport="pickle", hops=2):
    os.makedirs(tmp_path / "run", exist_ok=True)
    w = ShardWriter(str(tmp_path / "run" / "h-1-0001.flowmap.jsonl"), 1)
    for s in range(hops):
        w.hop(10 + s, "rollout/0", "learner", "sample", leaves, step=s, transport=transport)
    w.close(40)
    return flowmap.load(str(tmp_path / "run")).view


def test_an_array_pickled_at_its_own_size_is_no_serialisation_bloat(tmp_path):
    # 2 hops of a 100,000-element float32 array, pickled into its own 400,000 B: the
    # encoding costs nothing; what a copy costs is other findings' business
    assert not _of(findings(_pickled_run(tmp_path, [tensor("logprobs", (100_000,))])),
                   "serialisation")


@pytest.mark.parametrize("transport", ["shm", "collective"])
def test_raw_byte_transports_are_no_serialisation(tmp_path, transport):
    view = _pickled_run(tmp_path, [tensor("grads", (100_000,))], transport)
    assert not _of(findings(view), "serialisation")


def test_pickled_sentinels_are_no_serialisation(tmp_path):
    # `None` end-of-stream sentinels: a few bytes, no arrays
    view = _pickled_run(tmp_path, [("", "NoneType", (), "", "", 4, 1, None)], hops=3)
    assert not _of(findings(view), "serialisation")


def _true_padding_bytes(run, seam):
    """Padding bytes of `seam` computed from the fixture's real lengths (which the trace holds
    as the unpadded `input_ids`/`old_logprobs` leaves of each trajectory)."""
    length = {}
    for h in run.hops:
        if h.name == "trajectory":
            leaves = {leaf.path: leaf.shape for leaf in h.leaves}
            length[h.items[0]] = (leaves["input_ids"][0], leaves["old_logprobs"][0])
    wasted = 0.0
    for h in run.hops:
        if (h.src, h.dst, h.name) != seam:
            continue
        lens = [length[i] for i in h.items]
        for leaf in h.leaves:
            b, t = leaf.shape[:2]
            real = sum(x[0] for x in lens) if t == max(x[0] for x in lens) else sum(
                x[1] for x in lens)
            wasted += leaf.nbytes * (1 - real / (b * t))
    return wasted / run.num_steps


def test_padding_is_estimated_from_the_unpadded_leaves_of_the_same_items(rl_run, found):
    f = next(f for f in _of(found, "padding") if f.seams == ["batcher -> reward : batch"])
    assert f.bytes_per_step == pytest.approx(
        _true_padding_bytes(rl_run, ("batcher", "reward", "batch")))
    assert "estimated" in f.message


def test_padding_reported_by_a_counter_is_used_as_is(tmp_path):
    run = flowmap.load(write_rl_run(str(tmp_path / "run"), RLRunSpec(padding_counter=True)))
    f = next(f for f in _of(findings(run.view), "padding") if f.seams == ["batcher -> reward : batch"])
    seam = run.seams[("batcher", "reward", "batch")]
    fraction = run.counters["padding/batch"].mean
    assert f.bytes_per_step == pytest.approx(seam.bytes_per_step_mean * fraction)
    assert "reported" in f.message


def test_a_plain_in_process_run_has_no_findings(tmp_path):
    # GIVEN hops that handed over Python references: nothing was copied or sent
    run = flowmap.load(write_two_owner_run(str(tmp_path / "run"),
                                           [(i, "a", "b", "x", 100) for i in range(4)]))
    # THEN no seam is "heaviest" (it used to say "100% of all bytes moved")
    assert findings(run.view) == []


def test_heaviest_leaves_out_refs_one_offs_and_collectives(tmp_path):
    os.makedirs(tmp_path / "run")
    w = ShardWriter(str(tmp_path / "run" / "h-1-0001.flowmap.jsonl"), 1)
    for s in range(2):
        w.hop(10 + s, "a", "b", "x", [tensor("", (1000,), "float64")], step=s, transport="pickle")
        w.hop(30 + s, "b", "c", "big_ref", [tensor("", (100_000,), "float64")], step=s)
        w.hop(40 + s, "b", "group[0]", "all_reduce", [tensor("", (100_000,), "float64")],
              step=s, transport="collective")
    w.hop(50, "a", "c", "initial_weights", [tensor("", (100_000,), "float64")], step=0,
          transport="shm")
    w.close(60)
    (f,) = heaviest.detect(flowmap.load(str(tmp_path / "run")).view)
    # THEN only the float64 seam sent every step: the ref moved nothing, the all-reduce is the
    # training dtype's, the initial weights went once; 8,000 B a step moved, half at stake
    assert f.seams == ["a -> b : x"] and f.bytes_per_step == 4000


def test_an_empty_run_has_no_findings(tmp_path):
    assert findings(flowmap.load(write_two_owner_run(str(tmp_path / "run"), [])).view) == []


def _fanout(path, transport, steps):
    w = ShardWriter(os.path.join(path, "h-1-0001.flowmap.jsonl"), 1)
    for n, step in enumerate(steps):
        w.hop(10 * n, "src", f"dst{n}", "x", [tensor("t", (256,))], storages=(7,), step=step,
              transport=transport)
    w.close(1000)
    return flowmap.load(path)


@pytest.mark.parametrize(("transport", "steps", "copies"), [
    ("pickle", [0, 0, 0], 2),  # three copies of one storage in one step: two extra
    ("ref", [0, 0, 0], 0),  # references copy nothing
    ("pickle", [0, 1, 2], 0),  # one per step: the same buffer reused, not a duplicate
])
def test_duplicates_need_copies_of_one_storage_in_one_step(tmp_path, transport, steps, copies):
    run = _fanout(str(tmp_path / "run"), transport, steps)
    dups = _of(findings(run.view), "duplicate")
    assert sum(f.bytes_per_step for f in dups) == copies * 1024 / run.num_steps


def test_finding_as_dict_is_the_report_json_shape(rl_run, found):
    doc = report_document(rl_run.view)
    assert doc["findings"] == [f.as_dict() for f in found]
    assert set(doc["findings"][0]) == {"kind", "seams", "bytes_per_step", "message"}
    f = Finding("heaviest", ["a -> b : x"], 1 / 3, "m.")
    assert f.as_dict()["bytes_per_step"] == 0.333


def test_state_updated_in_place_is_not_a_pass_through(tmp_path):
    """GIVEN weights that arrive at the trainer once and leave every step from the same
    buffers (an optimizer updates them in place) THEN that is state, not a pass-through."""
    w = ShardWriter(os.path.join(tmp_path, "run", "h-1-0001.flowmap.jsonl"), 1)
    weights = [tensor("w", (64, 64)), tensor("b", (64,))]
    w.hop(0, "driver", "trainer/rank0", "initial_weights", weights, storages=(1, 2),
          transport="shm")
    for step in range(4):
        w.hop(100 + step, "trainer/rank0", "weight_sync", "state_dict", weights,
              storages=(1, 2), step=step, transport="shm")
    w.close(1000)
    run = flowmap.load(str(tmp_path / "run"))
    assert _of(findings(run.view), "pass_through") == []


GOLDEN = os.path.join(os.path.dirname(__file__), "test_findings_golden.rl_run.json")


def test_findings_json_matches_the_golden_file(found, golden):
    """GIVEN the GRPO-shaped run THEN `report --json`'s findings are exactly the golden ones.

    Regenerate with `pytest --update-golden` after an intended change, and read the diff.
    """
    golden.check(GOLDEN, json.dumps([f.as_dict() for f in found], indent=2, sort_keys=True) + "\n")


def _chain(tmp_path, transport: str):
    path = tmp_path / transport
    os.makedirs(path)
    w = ShardWriter(str(path / "h-1-0001.flowmap.jsonl"), 1)
    for s in range(4):
        w.hop(100 * s + 10, "rollout", "main", "batch", [tensor("x", (256,))], storages=(s + 1,),
              step=s, transport=transport)
        w.hop(100 * s + 20, "main", "trainer", "batch", [tensor("x", (256,))], storages=(s + 1,),
              step=s, transport=transport)
    w.close(1000)
    return flowmap.load(str(path)).view


def test_references_are_payload_not_bytes_moved(tmp_path):
    ref, sent = _chain(tmp_path, "ref"), _chain(tmp_path, "pickle")
    # the same payload size either way: 256 float32 = 1 KiB per hop, two hops a step
    assert ref.totals.bytes_per_step_mean == sent.totals.bytes_per_step_mean == 2 * 1024
    assert ref.totals.moved_bytes_per_step_mean == 0
    assert sent.totals.moved_bytes_per_step_mean == 2 * 1024
    doc = {s["name"]: s for s in report_document(ref)["seams"]}
    assert doc["batch"]["bytes_per_step"] == 1024 and doc["batch"]["moved_bytes_per_step"] == 0
    # Python handed `main` a reference: there is nothing to save by handing it a handle
    assert not _of(findings(ref), "pass_through")
    (f,) = _of(findings(sent), "pass_through")
    assert f.bytes_per_step == 1024 and "hand main a handle instead of 1.00 KiB/step" in f.message
    # the terminal report keeps the two apart as well
    for view, moved in ((ref, "all handed over by reference (nothing copied)"),
                        (sent, "2.00 KiB/step copied or sent")):
        buf = io.StringIO()
        print_report(view, Console(file=buf, width=120, force_terminal=False, color_system=None))
        assert "2.00 KiB/step payload" in buf.getvalue() and moved in buf.getvalue()
