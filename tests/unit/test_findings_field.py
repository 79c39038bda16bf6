"""The findings of the field's seam bugs on variants the gallery does not show.

examples/field/ holds one script per reported bug (tests/integration/
test_field_gallery.py); these are other shapes of the same patterns — other
names, sizes, nesting, several instances, and the look-alikes that must stay
quiet — so the detectors are checked on cases they were not tuned to. Figures
are computed here from the sizes written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from runs import ShardWriter, tensor

import flowmap
from flowmap.findings import findings
from flowmap.findings.chatty import BUCKET_BYTES, MESSAGE_COST_BYTES
from flowmap.integrations.transports.zmq import stable_endpoint
from flowmap.model.format import fmt_leaf_schema
from flowmap.model.json_forms import leaf_dict
from flowmap.model.projection import project


def _of(view, kind):
    return [f for f in findings(view) if f.kind == kind]


def _shard(tmp_path: Path) -> ShardWriter:
    os.makedirs(tmp_path / "run", exist_ok=True)
    return ShardWriter(str(tmp_path / "run" / "h-1-0001.flowmap.jsonl"), 1)


def _view(tmp_path: Path, w: ShardWriter, end: int = 10**6):
    w.close(end)
    return flowmap.load(str(tmp_path / "run")).view


# -- chatty ---------------------------------------------------------------------------------
def test_chatty_weight_sync_to_two_engines_with_large_parameters(tmp_path):
    # GIVEN 300 update_weight calls a step to each of two engines, 2 MiB a parameter
    # (up and down projections: unlike shapes, as a model's parameters are)
    w, t = _shard(tmp_path), 0
    params = (tensor("weight", (512, 1024)), tensor("weight", (1024, 512)))  # float32: 2 MiB
    for s in range(2):
        for i in range(300):
            for e in (0, 1):
                t += 1
                w.hop(t, "actor", f"engine/{e}", "update_weight", [params[i % 2]], step=s,
                      transport="rpc")
    (f,) = _of(_view(tmp_path, w), "chatty")
    # 600 MiB a step on each seam: 2 buckets of 512 MiB, 298 messages spared on each
    needed = -(-300 * (2 << 20) // BUCKET_BYTES)
    assert needed == 2
    assert f.bytes_per_step == 2 * (300 - needed) * MESSAGE_COST_BYTES
    assert f.seams == ["actor -> engine/0 : update_weight", "actor -> engine/1 : update_weight"]


def test_streamed_items_references_and_stepless_runs_are_not_chatty(tmp_path):
    w = _shard(tmp_path)
    t = 0
    for s in range(2):
        for i in range(100):
            t += 1  # trajectories one by one, each an item: the pipeline's unit
            w.hop(t, "rollout/0", "buffer", "trajectory", [tensor("ids", (64,), "int64")],
                  step=s, transport="pickle", items=[f"{s}-{i}"])
            w.hop(t, "buffer", "batcher", "trajectory", [tensor("ids", (64,), "int64")], step=s)
    assert not _of(_view(tmp_path, w), "chatty")
    w = ShardWriter(str(tmp_path / "stepless" / "h-1-0001.flowmap.jsonl"), 1)
    for i in range(100):
        w.hop(i, "a", "b", "msg", [tensor("x", (8,))], transport="pickle")
    w.close(1000)
    assert not _of(flowmap.load(str(tmp_path / "stepless")).view, "chatty")


# -- prefix resend --------------------------------------------------------------------------
def test_two_interleaved_conversations_each_resend_their_prefix(tmp_path):
    # GIVEN conversations "a" and "b" whose log-probs leaf (1, n) grows turn by turn, interleaved
    w, t = _shard(tmp_path), 0
    sizes = {"a": (10, 25, 31, 50, 52), "b": (7, 9, 30)}
    for turn in range(5):
        for conv, lens in sizes.items():
            if turn < len(lens):
                t += 1
                w.hop(t, "sglang/0", "env_worker", "generate",
                      [tensor("out.logprobs", (1, lens[turn])), tensor("out.text", (3,), "int64")],
                      step=0, transport="zmq", items=[conv])
    (f,) = _of(_view(tmp_path, w), "prefix_resend")
    resent = (10 + 25 + 31 + 50 + 7 + 9) * 4  # every turn but each conversation's last, float32
    assert f.bytes_per_step == resent and "out.logprobs" in f.message


def test_growth_without_the_same_item_is_no_resent_prefix(tmp_path):
    w = _shard(tmp_path)
    for i, n in enumerate((5, 9, 14, 20, 31)):  # growing lengths, a new trajectory each time
        w.hop(i, "rollout", "trainer", "traj", [tensor("ids", (n,), "int64")], step=0,
              transport="pickle", items=[i])
    for i, n in enumerate((5, 9, 14, 20, 31)):  # growing, no item ids at all
        w.hop(100 + i, "rollout", "critic", "traj", [tensor("ids", (n,), "int64")], step=0,
              transport="pickle")
    assert not _of(_view(tmp_path, w), "prefix_resend")


# -- wide ids -------------------------------------------------------------------------------
def test_expert_ids_bounded_by_the_preset_under_projection(tmp_path):
    # GIVEN int64 routed experts of 2 trajectories a hop, dims named; no range declared
    w = _shard(tmp_path)
    dims = ("tokens", "layers", "topk")
    for s in range(2):
        w.hop(s, "rollout", "trainer", "samples",
              [tensor("[*].rollout_routed_experts", (10, 3, 2), "int64", count=2, dims=dims)],
              step=s, transport="rpc")
    run = flowmap.load(_view(tmp_path, w).path)
    assert not _of(run.view, "wide_ids")  # the number of experts is not known
    projected = project(run, "deepseek-v3.2@32k").view
    (f,) = _of(projected, "wide_ids")
    leaf = 32768 * 61 * 8 * 8 * 2  # tokens × layers × topk × int64, two trajectories
    assert f.bytes_per_step == pytest.approx(leaf * 7 / 8)  # 256 experts: uint8
    assert "uint8" in f.message and "experts=256" in f.message


def test_indexer_positions_bounded_by_their_tokens_dim(tmp_path):
    w = _shard(tmp_path)
    for s in range(3):
        w.hop(s, "engine", "learner", "replay",
              [tensor("indexer_topk", (300, 2, 16), "int32", dims=("tokens", "layers", "index_topk")),
               tensor("token_ids", (300,), "int64")], step=s, transport="shm")
    (f,) = _of(_view(tmp_path, w), "wide_ids")
    assert f.bytes_per_step == 300 * 2 * 16 * 4 / 2  # 300 positions and -1: int16
    # 301 values, said as what they are (it used to say "take 300 values")
    assert "its ids are token positions 0..299 (its `tokens` dim) or -1: int16 holds them" \
        in f.message


def test_a_finding_under_one_percent_of_the_step_is_left_out(tmp_path):
    # GIVEN 64 int64 ids of 16 values (448 B/step to spare) next to 1 MiB pickled a step
    # (a finding, were it not under 1 % of the step)
    w = _shard(tmp_path)
    w.counter(1, "range/expert_ids", 16)
    for s in range(2):
        w.hop(10 + s, "rollout", "learner", "sample",
              [tensor("hidden", (256, 1024)), tensor("expert_ids", (64,), "int64")],
              step=s, transport="pickle")
    assert [f.kind for f in findings(_view(tmp_path, w))] == []


def test_declared_range_is_read_only_for_integer_leaves(tmp_path):
    w = _shard(tmp_path)
    w.counter(1, "range/choice", 1000)
    w.counter(1, "range/probs", 10)
    for s in range(2):
        w.hop(10 + s, "a", "b", "c", [tensor("choice", (50,), "int64"), tensor("probs", (50,))],
              step=s, transport="pickle")
    (f,) = _of(_view(tmp_path, w), "wide_ids")
    assert f.bytes_per_step == 50 * 8 * 6 / 8 and "int16" in f.message  # 1,000 ids


# -- views and masks, through the real tracer ------------------------------------------------
class Sample:
    def __init__(self, **fields):
        self.__dict__.update(fields)


def test_a_nested_view_pickled_and_shared(tmp_path):
    # GIVEN a (512, 64) float32 block (128 KiB); rows 2..4 of it nested in an object, pickled
    # each step; and views of one kept block sent through shared memory twice, which moves
    # the block there the first time only
    with flowmap.tracing(str(tmp_path / "run")):
        kept = torch.zeros(256, 256)
        for s in range(2):
            flowmap.step(s)
            block = torch.zeros(512, 64)
            flowmap.hop("engine", "learner", Sample(extra={"hidden": block[2:4]}),
                        name="out", transport="pickle")
            flowmap.hop("engine", "learner", {"copy": block[2:4].clone()}, name="copied",
                        transport="pickle")
            flowmap.hop("engine", "ref_user", {"hidden": block[2:4]}, name="out")  # no copy
            flowmap.hop("engine", "pool", {"kv": kept[s]}, name="kv", transport="shm")
            kept.share_memory_()  # what sending it did: later views of it cross as handles
    found = _of(flowmap.load(str(tmp_path / "run")).view, "view")
    by_seam = {tuple(f.seams): f for f in found}
    assert set(by_seam) == {("engine -> learner : out",), ("engine -> pool : kv",)}
    assert by_seam[("engine -> learner : out",)].bytes_per_step == (512 - 2) * 64 * 4
    assert "`extra.hidden`" in by_seam[("engine -> learner : out",)].message
    # the kept block moved to shared memory once, over two steps; a pool made shared
    # beforehand (the built-in trainer's slots) never moves: no finding
    assert by_seam[("engine -> pool : kv",)].bytes_per_step == (256 * 256 - 256) * 4 / 2


def test_padding_counted_from_a_nested_loss_mask(tmp_path):
    lengths = (3, 17, 9)
    with flowmap.tracing(str(tmp_path / "run")):
        for s in range(2):
            flowmap.step(s)
            mask = torch.zeros(3, 32, dtype=torch.int64)
            for i, n in enumerate(lengths):
                mask[i, :n] = 1
            flowmap.hop("batcher", "trainer/rank0", {"mb": {"loss_mask": mask,
                                                            "logprobs": torch.zeros(3, 32)}},
                        name="micro_batch", transport="shm")
    (f,) = _of(flowmap.load(str(tmp_path / "run")).view, "padding")
    masked = 3 * 32 * 8 + 3 * 32 * 4
    assert f.bytes_per_step == pytest.approx(masked * (1 - sum(lengths) / 96))
    assert "counted from the mask" in f.message


# -- no false names -------------------------------------------------------------------------
def test_a_leaf_whose_rank_varies_is_not_a_0d_leaf(tmp_path):
    w = _shard(tmp_path)
    w.hop(1, "a", "b", "c", [tensor("x", (3,)), ("n", "int", (), "", "", 8, 1, None)], step=0)
    w.hop(2, "a", "b", "c", [tensor("x", (2, 4)), ("n", "int", (), "", "", 8, 1, None)], step=0)
    leaves = {leaf.path: leaf for leaf in _view(tmp_path, w).seams[("a", "b", "c")].leaves}
    assert leaves["x"].ranks == (1, 2) and leaf_dict(leaves["x"])["shape"] is None
    assert fmt_leaf_schema(leaves["x"]) == "float32[rank 1..2]"
    assert leaves["n"].ranks is None and leaf_dict(leaves["n"])["shape"] == []


@pytest.mark.parametrize(("endpoint", "name"), [
    ("tcp://127.0.0.1:44803", "tcp://127.0.0.1:*"),  # bind_to_random_port, port 0
    ("tcp://127.0.0.1:5555", "tcp://127.0.0.1:5555"),  # a port the program chose
    ("ipc:///tmp/engine.sock", "ipc:///tmp/engine.sock"),
])
def test_zmq_seam_names_leave_out_ports_the_os_chose(endpoint, name):
    assert stable_endpoint(endpoint) == name


# -- the findings lead the outputs ------------------------------------------------------------
def test_check_markdown_leads_with_the_findings_ranked(tmp_path):
    from flowmap.check import baseline as baseline_file
    from flowmap.check.gate import Options, check
    from flowmap.check.snapshot import from_run
    from flowmap.reporters.check_formats import markdown

    w = _shard(tmp_path)
    w.counter(1, "range/expert_ids", 16)
    for s in range(2):  # a 1 MiB pickled array and 128 KiB of int64 ids of 16 values
        w.hop(10 + s, "rollout", "learner", "sample",
              [tensor("hidden", (256, 1024)), tensor("expert_ids", (16384,), "int64")],
              step=s, transport="pickle", nbytes=2 * (1 << 20) + 2 * (128 << 10))  # 2x: bloat
    view = _view(tmp_path, w)
    baseline_file.write(str(tmp_path / "base.json"), from_run(view))
    report, _ = check(Options(run=view.path, baseline=str(tmp_path / "base.json"),
                              findings=lambda v: tuple(f.as_dict() for f in findings(v))))
    text = markdown.render_check(report)
    assert [f["kind"] for f in report.findings] == ["serialisation", "wide_ids"]
    assert text.index("**serialisation**") < text.index("**wide_ids**") < text.index("| Seam |")
    assert "1.12 MiB/step" in text and "112 KiB/step" in text  # wire - own; 7/8 of 128 KiB
    assert "`rollout -> learner : sample`" in text


def test_views_of_a_shared_memory_pool_cross_as_handles(tmp_path):
    with flowmap.tracing(str(tmp_path / "run")):
        slot = torch.zeros(1 << 20, dtype=torch.uint8).share_memory_()
        for s in range(2):
            flowmap.step(s)
            mb = {"input_ids": slot[:512].view(torch.int64).view(4, 16)}
            flowmap.hop("batcher", "trainer/rank0", mb, name="micro_batch", transport="shm")
    assert not _of(flowmap.load(str(tmp_path / "run")).view, "view")


def test_chunks_of_one_batch_each_to_its_rank_through_shared_memory_are_no_view(tmp_path):
    # GIVEN a batch cut in two chunks, each put in its rank's shared-memory queue: the batch's
    # storage moves once, and holds what was sent; beside it, one row of a block sent so
    with flowmap.tracing(str(tmp_path / "run")):
        for s in range(2):
            flowmap.step(s)
            tokens, block = torch.zeros(64, 512, dtype=torch.int32), torch.zeros(512, 64)
            for r, part in enumerate(tokens.chunk(2)):
                flowmap.hop("dispatcher", f"trainer/rank{r}", {"tokens": part}, name="batch",
                            transport="shm")
            flowmap.hop("policy", "sampler", {"last": block[-1]}, name="logits", transport="shm")
    found = _of(flowmap.load(str(tmp_path / "run")).view, "view")
    # THEN only the row is a view finding: its block moved whole for one row
    assert [f.seams for f in found] == [["policy -> sampler : logits"]]
    assert found[0].bytes_per_step == (512 - 1) * 64 * 4


def test_chunks_put_while_a_feeder_moves_their_storage_are_no_view(tmp_path):
    # GIVEN a batch cut in four chunks, each put in its rank's shared-memory queue, the
    # first queue's feeder moving the storage into shared memory before the other puts (so
    # only the first chunk is noted as a view of a storage not shared yet)
    with flowmap.tracing(str(tmp_path / "run")):
        for s in range(2):
            flowmap.step(s)
            tokens = torch.zeros(64, 512, dtype=torch.int32)
            for r, part in enumerate(tokens.chunk(4)):
                flowmap.hop("dispatcher", f"trainer/rank{r}", {"tokens": part}, name="batch",
                            transport="shm")
                tokens.share_memory_()
    # THEN the four chunks hold all of the storage: it moved once, for data that was sent
    assert _of(flowmap.load(str(tmp_path / "run")).view, "view") == []


def test_gradient_all_reduce_is_no_heaviest_seam(tmp_path):
    # GIVEN two ranks all-reducing 1 MiB of gradients a step, and a 512 KiB pickled float64 batch
    w = _shard(tmp_path)
    for s in range(2):
        for r in (0, 1):
            w.hop(10 * s + r, f"trainer/rank{r}", "group[0,1]", "all_reduce",
                  [tensor("", (262_144,))], step=s, transport="collective")
        w.hop(10 * s + 5, "driver", "trainer/rank0", "batch",
              [tensor("adv", (65_536,), "float64")], step=s, transport="pickle")
    found = findings(_view(tmp_path, w))
    assert not [f for f in found if any("all_reduce" in seam for seam in f.seams)]
    # the float64 batch is a finding of its own next to its pickling: two changes, each priced
    (heavy,) = [f for f in found if f.kind == "heaviest"]
    assert heavy.seams == ["driver -> trainer/rank0 : batch"] and heavy.bytes_per_step == 262_144


def test_tagged_items_go_to_the_object_tagged_and_only_once(tmp_path):
    from flowmap.capture import item_tags

    with flowmap.tracing(str(tmp_path / "run")):
        traj = {"uid": 7}
        assert flowmap.tag_items(traj, [7, "g1"]) is traj
        assert item_tags.take({"uid": 7}) is None  # an equal object is not the one tagged
        assert item_tags.take(traj) == [7, "g1"]
        assert item_tags.take(traj) is None  # taken by the send that carried it
    assert flowmap.tag_items(traj, [8]) is traj and item_tags.take(traj) is None  # not tracing


# -- projected like the rest ------------------------------------------------------------------
def test_a_resent_prefix_is_projected_with_its_leaf(tmp_path):
    # GIVEN one conversation's routed experts growing 8 -> 16 -> 24 tokens, dims named
    w = _shard(tmp_path)
    for turn, tokens in enumerate((8, 16, 24)):
        w.hop(turn, "engine", "agent", "turn", [tensor("routed_experts", (tokens, 2, 2), "int32",
                                                       dims=("tokens", "layers", "topk"))],
              step=0, transport="rpc", items=["c"])
    run = flowmap.load(_view(tmp_path, w).path)
    (traced,) = _of(run.view, "prefix_resend")
    assert traced.bytes_per_step == (8 + 16) * 2 * 2 * 4
    (projected,) = _of(project(run, "deepseek-v3.2@32k").view, "prefix_resend")
    # each resent leaf at the preset's scale: 32,768 tokens × 61 layers × top-8, int32
    assert projected.bytes_per_step == pytest.approx(2 * 32768 * 61 * 8 * 4)


def test_a_view_is_projected_with_its_leaf(tmp_path):
    with flowmap.tracing(str(tmp_path / "run")):
        block = torch.zeros(100, 4, 2, dtype=torch.int32)  # 3,200 B; rows 0..10 are 320 B
        flowmap.step(0)
        flowmap.hop("engine", "learner", {"routed_experts": block[:10]}, name="out",
                    transport="pickle", dims={"routed_experts": ("tokens", "layers", "topk")})
    run = flowmap.load(str(tmp_path / "run"))
    (traced,) = _of(run.view, "view")
    assert traced.bytes_per_step == 3200 - 320
    (projected,) = _of(project(run, "deepseek-v3.2@32k").view, "view")
    leaf = 32768 * 61 * 8 * 4  # the view's leaf at the preset's scale; its storage 10× as large
    assert projected.bytes_per_step == pytest.approx(leaf * 10 - leaf)


def test_check_cli_markdown_shows_the_findings_and_text_does_not_compute_them(tmp_path):
    from typer.testing import CliRunner

    from flowmap.cli.main import app

    w = _shard(tmp_path)
    for s in range(2):
        w.hop(10 + s, "rollout", "learner", "sample", [tensor("hidden", (256, 1024))], step=s,
              transport="pickle", nbytes=2 << 20)  # pickled into twice its bytes
    run = _view(tmp_path, w).path
    base = str(tmp_path / "base.json")
    assert CliRunner().invoke(app, ["baseline", run, "-o", base]).exit_code == 0
    md = CliRunner().invoke(app, ["check", run, "--baseline", base, "--format", "markdown"])
    assert md.exit_code == 0, md.output
    assert "**serialisation**" in md.output and md.output.index("Findings") < md.output.index("| Seam |")
    text = CliRunner().invoke(app, ["check", run, "--baseline", base])
    assert text.exit_code == 0 and "serialisation" not in text.output


def test_leaf_notes_stay_in_the_detail_window_under_aggregate(tmp_path):
    # GIVEN a 4 KiB-row view of a 64 KiB block pickled every step, 5 steps, a 1-step window
    with flowmap.tracing(str(tmp_path / "run"), aggregate=1):
        for s in range(5):
            flowmap.step(s)
            block = torch.zeros(16, 1024)
            flowmap.hop("engine", "learner", {"row": block[:1]}, name="out", transport="pickle")
    run = flowmap.load(str(tmp_path / "run"))
    assert len([n for sh in run.view.events.shards for n in sh.notes]) == 1  # the window's hop
    (f,) = _of(run.view, "view")
    assert f.bytes_per_step == (16 - 1) * 1024 * 4  # per step of the window


def test_a_filtered_drop_names_the_role_seam_that_carried_most_of_it(tmp_path):
    from flowmap.findings import dropped

    # GIVEN two engines storing 4 KiB per sample, then 64 B to the batcher, which drops
    # half as zero_variance
    w = _shard(tmp_path)
    for s in range(2):
        items = [f"s{s}-{i}" for i in range(4)]
        for e in (0, 1):
            w.hop(10 * s + e, f"rollout/{e}", "store", "replay", [tensor("x", (2, 512))],
                  step=s, transport="shm", items=items[2 * e: 2 * e + 2])
        w.hop(10 * s + 5, "store", "batcher", "ids", [tensor("ids", (4, 4))], step=s,
              items=items)
        w.drop(10 * s + 6, "batcher", "zero_variance", items[:2])
    (f,) = dropped.detect(_view(tmp_path, w))
    # THEN at stake 2 items a step x (2,048 + 16) B, and the role seam `rollout -> store` is named
    assert f.bytes_per_step == 2 * (4096 / 2 + 64 / 4)
    assert "most of it on `rollout -> store : replay`; filter them before that hop" in f.message


def test_a_relayed_handle_of_a_few_bytes_is_no_finding_whatever_the_run(tmp_path):
    # GIVEN a run whose data moves where no hop sees it: the rollout sends the driver a slot
    # handle of 80 B, which the driver hands on to the trainer; and the same with 4 KiB
    for n in (10, 512):
        run = tmp_path / f"run{n}"
        with flowmap.tracing(str(run)):
            for s in range(3):
                flowmap.step(s)
                handle = {"slot": torch.zeros(n, dtype=torch.int64)}
                flowmap.hop("rollout", "driver", handle, name="handle", transport="pickle")
                flowmap.hop("driver", "trainer", handle, name="handle", transport="pickle")
        found = _of(flowmap.load(str(run)).view, "pass_through")
        # THEN 80 B a step is a control message; 4 KiB a step is worth a line
        assert bool(found) is (n == 512), (n, found)


def test_handle_dicts_relayed_by_schema_alone_are_no_finding_but_relayed_text_is(tmp_path):
    # GIVEN a rollout that writes its rows into a shared-memory block and sends the driver
    # four handle dicts a step (the block's name, an offset, the rows: 320 B), which the
    # driver hands on, each pickled again; and a driver relaying 16 prompts of 400 characters
    for what in ("handles", "prompts"):
        run = tmp_path / what
        with flowmap.tracing(str(run)):
            for s in range(3):
                flowmap.step(s)
                for i in range(4 if what == "handles" else 16):
                    msg = ({"shm": "psm_" + "0f3a2c" * 10, "offset": 24576 * (4 * s + i), "rows": 8}
                           if what == "handles" else {"prompt": f"{s}-{i} " + "x" * 400})
                    flowmap.hop("rollout", "driver", msg, name="msg", transport="pickle")
                    flowmap.hop("driver", "trainer", dict(msg), name="msg", transport="pickle")
        found = _of(flowmap.load(str(run)).view, "pass_through")
        # THEN the handles are the fix, not the fault; 6 KiB of prompts a step is a relay
        assert bool(found) is (what == "prompts"), (what, found)


def test_a_response_masks_tail_in_rows_an_attention_mask_calls_full_is_no_padding(tmp_path):
    # GIVEN a multi-turn batch whose rows are full (attention mask of ones), a quarter of
    # them ending on tool tokens the response mask zeroes; and the same rows padded instead
    for padded in (False, True):
        run = tmp_path / f"run{padded}"
        with flowmap.tracing(str(run)):
            for s in range(2):
                flowmap.step(s)
                response_mask = torch.ones(16, 128, dtype=torch.bool)
                response_mask[::4, 96:] = False
                attention_mask = torch.ones(16, 160, dtype=torch.bool)
                if padded:
                    attention_mask[:, 32:] = response_mask
                flowmap.hop("rollout", "actor", {
                    "input_ids": torch.zeros(16, 160, dtype=torch.int32),
                    "attention_mask": attention_mask, "response_mask": response_mask,
                    "log_probs": torch.zeros(16, 128)}, name="batch", transport="pickle")
        found = _of(flowmap.load(str(run)).view, "padding")
        # THEN the tool tokens are not padding; the padded rows' tails are
        assert bool(found) is padded, (padded, found)


def test_a_socket_is_named_in_a_findings_message_as_the_seam_table_names_it():
    from flowmap.findings.common import Finding, named_as_seams

    one = Finding("pass_through", ["a -> b : PUSH tcp://127.0.0.1:*", "b -> c : PUSH tcp://127.0.0.1:*"],
                  1.0, "`PUSH tcp://*.*.*.*:*` passes through b")
    assert named_as_seams(one).message == "`PUSH tcp://127.0.0.1:*` passes through b"
    # one socket per rank, on two hosts: the role-level name is the only one for both
    two = Finding("duplicate", ["d -> r/0 : PUSH tcp://10.0.0.1:*", "d -> r/1 : PUSH tcp://10.0.0.2:*"],
                  1.0, "`PUSH tcp://*.*.*.*:*` to every rank")
    assert named_as_seams(two).message == two.message
