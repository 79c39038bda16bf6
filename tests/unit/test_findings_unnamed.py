"""Findings on payloads that name nothing: unnamed masks, left padding, drops by the program's
own ids, conversations in shuffled turns, lengths in a vector, token ids in int64 left alone.

Each is the evidence an independently written pipeline gives (no `*mask*` leaf, no item
ids, no counters), with the fixed shape beside it where a detector could be fooled.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import torch
from runs import ShardWriter, items_json, tensor

import flowmap
from flowmap.capture.leaf_notes import collect
from flowmap.findings import findings


def _of(view, kind):
    return [f for f in findings(view) if f.kind == kind]


def _shard(tmp_path: Path) -> ShardWriter:
    os.makedirs(tmp_path / "run", exist_ok=True)
    return ShardWriter(str(tmp_path / "run" / "h-1-0001.flowmap.jsonl"), 1)


def _view(tmp_path: Path, w: ShardWriter):
    w.close(10**6)
    return flowmap.load(str(tmp_path / "run")).view


# -- masks found by their values, left padding ------------------------------------------------
def test_an_unnamed_zero_one_array_beside_ids_is_counted_as_a_mask():
    ids = torch.full((4, 10), 2)
    att = torch.zeros((4, 10), dtype=torch.int64)
    for i, n in enumerate((3, 5, 7, 10)):  # left padding: each row ends filled
        ids[i, 10 - n:] = torch.arange(100, 100 + n)
        att[i, 10 - n:] = 1
    # an integer array is read to tell whether it is a mask only under `trace --values`
    assert collect((ids, att)) == []
    notes = {path: real for path, _, _, real in collect((ids, att), unnamed=True)}
    assert notes == {"[1]": 3 + 5 + 7 + 10}  # the ids (values past 1) are no mask
    valid = np.zeros((4, 10), bool)
    valid[:, :6] = True  # right padding, a numpy bool array: a mask by its dtype, always read
    got = collect({"ids": np.full((4, 10), 5, np.int32), "valid": valid})
    assert [(p, real) for p, _, _, real in got] == [("valid", 24)]


def test_unnamed_zero_one_arrays_that_mark_no_padding_are_no_masks():
    # alone (nothing beside it of its leading dims): not read at all
    assert collect({"flags": torch.zeros((4, 10), dtype=torch.int64)}, unnamed=True) == []
    # a packed row's loss weight (ones on each response): no padding mask
    weight = torch.cat([torch.zeros(30), torch.ones(90), torch.zeros(20), torch.ones(40)])[None]
    ids = torch.randint(2, 1000, (1, 180))
    assert collect((ids, weight.to(torch.int64)), unnamed=True) == []
    # a 0/1 reward at each row's last token, beside its ids: a signal, not a mask
    reward = torch.zeros((8, 100))
    reward[:, 60] = torch.tensor([1.0, 0, 1, 1, 0, 1, 0, 1])
    assert collect({"ids": torch.randint(2, 1000, (8, 100)), "score": reward},
                   unnamed=True) == []
    # probabilities in [0, 1] are no mask; a float 0/1 attention is
    att = torch.ones((8, 100))
    att[:, 70:] = 0
    got = collect({"ids": torch.randint(2, 1000, (8, 100)), "p": torch.rand(8, 100), "att": att},
                  unnamed=True)
    assert [(p, real) for p, _, _, real in got] == [("att", 8 * 70)]


def test_padding_is_found_from_a_mask_the_tracer_counted_whatever_its_name(tmp_path):
    w = _shard(tmp_path)
    leaves = [tensor("[0]", (8, 256), "int64"), tensor("[1]", (8, 256), "int64")]
    for s in range(2):
        w.step(s * 10, s)
        w.hop(s * 10 + 1, "collator", "policy", "tuple", leaves, step=s, transport="shm")
        w.writer.leaf_notes(s * 10 + 2, "collator", "(untraced)", "tuple", "shm", s,
                            [["[1]", 16384, None, 600]])
    (f,) = _of(_view(tmp_path, w), "padding")
    assert f.bytes_per_step == 32768 * (1 - 600 / 2048) and "counted from the mask" in f.message


def test_of_two_masks_of_one_shape_the_one_marking_most_real_decides(tmp_path):
    # attention (all but the tail real) and a loss mask (the prompt zeroed too)
    w = _shard(tmp_path)
    leaves = [tensor("ids", (4, 100), "int64"), tensor("attention_mask", (4, 100), "int64"),
              tensor("loss_mask", (4, 100), "int64")]
    w.step(0, 0)
    w.hop(1, "rollout", "trainer", "batch", leaves, step=0, transport="pickle")
    w.writer.leaf_notes(2, "rollout", "trainer", "batch", "pickle", 0,
                        [["attention_mask", 3200, None, 300], ["loss_mask", 3200, None, 150]])
    (f,) = _of(_view(tmp_path, w), "padding")
    assert f.bytes_per_step == 3 * 3200 * (1 - 300 / 400)


def test_a_loss_masks_leading_zeros_are_a_prompt_and_an_attention_masks_are_padding():
    # GIVEN four full rows (prompt and response fill each of 256 positions): a loss mask
    # zeroing each row's prompt (40, 60, 80, 100 tokens), and the same zeros in an
    # attention mask (left padding) and in a mask of no telling name
    zeros = np.ones((4, 256), np.int64)
    for r, n in enumerate((40, 60, 80, 100)):
        zeros[r, :n] = 0
    t = torch.from_numpy(zeros)
    notes = {n[0]: n[3] for n in collect({"input_ids": t.clone(), "loss_mask": t,
                                          "response_mask": t.clone(),
                                          "attention_mask": t.clone(), "mask": t.clone()})}
    # THEN the loss and response masks mark no padding: every position is real; the attention
    # mask's leading zeros are padding, and so are a bare mask's in rows that all end filled
    assert notes["loss_mask"] == notes["response_mask"] == 4 * 256
    assert notes["attention_mask"] == notes["mask"] == 4 * 256 - (40 + 60 + 80 + 100)
    # a loss mask's trailing zeros are padding still (right-padded responses)
    tails = torch.from_numpy(zeros[:, ::-1].copy())
    ((_, _, _, real),) = collect({"loss_mask": tails})
    assert real == 4 * 256 - (40 + 60 + 80 + 100)


def test_left_padding_without_a_mask_is_read_from_zero_heads():
    from flowmap.capture.values import figures

    rows = np.zeros((4, 50), np.int32)
    for i, n in enumerate((10, 20, 30, 50)):
        rows[i, 50 - n:] = 7
    ((path, lo, hi, total, zero_tail, elements, filled),) = figures({"tokens": rows})
    assert (path, lo, hi, total, elements) == ("tokens", 0, 7, None, 200)
    assert zero_tail == 200 - (10 + 20 + 30 + 50) and filled == 10 + 20 + 30 + 50
    # a vector of lengths gets its sum, for `padding` to read
    ((_, _, _, total, _, _, _),) = figures({"seq_lens": np.array([3, 4, 5])})
    assert total == 12


def test_lengths_in_an_integer_vector_sampled_with_values_give_the_padding(tmp_path):
    w = _shard(tmp_path)
    leaves = [tensor("input_ids", (4, 100), "int32"), tensor("seq_lens", (4,), "int64")]
    w.step(0, 0)
    w.hop(1, "rollout", "trainer", "batch", leaves, step=0, transport="pickle")
    w.writer.value_figures(2, "rollout", "trainer", "batch", "pickle", 0,
                           [["input_ids", 151_643, 151_643, None, 0, 400],
                            ["seq_lens", 20, 80, 200, 0, 4]])
    (f,) = _of(_view(tmp_path, w), "padding")
    assert f.bytes_per_step == 1600 * (1 - 200 / 400) and "list of lengths" in f.message


def test_an_event_flag_ending_in_zeros_is_no_padding_and_ids_ending_in_zeros_are(tmp_path):
    from flowmap.capture.values import figures

    # GIVEN a vectorised env's rollout, every position a real transition: `dones` is zero
    # but where an episode ends, so each row ends in zeros after its last end; and the same
    # rollout as ids padded with zero tails (rows of 40 to 128 real positions)
    rng = np.random.default_rng(0)
    dones = np.zeros((16, 128), np.uint8)
    for row in dones:
        row[rng.choice(100, 3, replace=False)] = 1
    ids = np.zeros((16, 128), np.int64)
    for row in ids:
        row[: rng.integers(40, 129)] = rng.integers(1, 32000)
    for what, flags in (("dones", dones), ("ids", ids)):
        w = _shard(tmp_path / what)
        payload = {"obs": np.ones((16, 128, 8), np.float32), "flags": flags}
        w.step(0, 0)
        w.hop(1, "env", "learner", "rollout", [tensor("obs", (16, 128, 8)),
                                                tensor("flags", (16, 128), str(flags.dtype))],
              step=0, transport="pickle")
        w.writer.value_figures(2, "env", "learner", "rollout", "pickle", 0, figures(payload))
        found = _of(_view(tmp_path / what, w), "padding")
        # THEN the flag's zeros are real transitions; the ids' tails hold nothing
        assert bool(found) is (what == "ids"), (what, found)


# -- wide ids: token ids in int64 are what every tokenizer returns --------------------------
def test_int64_token_ids_are_not_wide_ids_and_action_ids_are(tmp_path):
    # GIVEN sampled values of int64 token ids of a 32k vocabulary (a fixed control's shape)
    # and of int64 action ids 0..5
    w = _shard(tmp_path)
    w.step(0, 0)
    for t, (name, hi) in enumerate((("tokens", 31_999), ("actions", 5))):
        w.hop(10 * t + 1, "gen", "trainer", name, [tensor("ids", (16, 256), "int64")],
              step=0, transport="pickle")
        w.writer.value_figures(10 * t + 2, "gen", "trainer", name, "pickle", 0,
                               [["ids", 0, hi, None, 0, 4096]])
    # THEN only the action ids are wide (8 bits hold them), not the vocabulary
    (f,) = _of(_view(tmp_path, w), "wide_ids")
    assert f.seams == ["gen -> trainer : actions"] and "uint8" in f.message
    assert f.bytes_per_step == 16 * 256 * 8 * 7 / 8


# -- dropped: ids no message carried ----------------------------------------------------------
def test_a_drop_of_ids_no_message_carried_charges_as_many_messages(tmp_path):
    w = _shard(tmp_path)
    w.step(0, 0)
    for i in range(6):
        w.hop(10 + i, "actor", "learner", "Traj", [tensor("tokens", (1, 200), "int64")],
              step=0, transport="shm")
    w.drop(20, "learner", "stale", ["<Traj@7f01>", "<Traj@7f02>"])
    (f,) = _of(_view(tmp_path, w), "dropped")
    assert f.bytes_per_step == 2 * 1600 and "2 messages" in f.message
    assert f.seams == ["actor -> learner : Traj"]


def test_items_dropped_from_a_received_batch_charge_their_share_of_it(tmp_path):
    w = _shard(tmp_path)
    w.step(0, 0)
    batch = [tensor("[*].tokens", (300,), "int64", count=8), tensor("[*].logp", (300,), count=8)]
    w.hop(10, "actor", "learner", "list", batch, step=0, transport="shm")
    w.drop(20, "learner", "stale", ["<Traj@1>", "<Traj@2>", "<Traj@3>"])
    (f,) = _of(_view(tmp_path, w), "dropped")
    assert f.bytes_per_step == 8 * 300 * 12 * 3 / 8 and "3 items of batched messages" in f.message


# -- prefix_resend: shuffled turns, long prompts; random lengths are none ---------------------
def _stream(w: ShardWriter, steps: list[list[int]]) -> None:
    t = 0
    for s, lengths in enumerate(steps):
        w.step(t, s)
        for n in lengths:
            t += 1
            w.hop(t, "agent", "learner", "Turn", [tensor("tokens", (1, n), "int64")],
                  step=s, transport="shm")


def test_long_prompts_with_short_turns_in_shuffled_order_are_a_resent_prefix(tmp_path):
    prompts, grow, rng = (320, 352, 384, 416), (24, 40, 56, 32), random.Random(3)
    steps = []
    for _ in range(3):
        lengths = []
        for k in range(5):
            order = list(range(4))
            rng.shuffle(order)
            lengths += [prompts[c] + grow[c] * k for c in order]
        steps.append(lengths)
    w = _shard(tmp_path)
    _stream(w, steps)
    (f,) = _of(_view(tmp_path, w), "prefix_resend")
    resent = sum(sum(prompts[c] + grow[c] * k for k in range(4)) for c in range(4)) * 8
    # turns in shuffled order link to the chain that waited longest: a turn may continue
    # another conversation, so the figure is near the hand's, not equal to it
    assert abs(f.bytes_per_step - resent) <= 0.1 * resent


def test_conversations_in_threads_of_overlapping_lengths_in_no_order_are_a_resent_prefix(
        tmp_path):
    # GIVEN 3 conversations (prompts 200, 300, 400; 100 tokens a turn, 4 turns), each turn's
    # whole history put on one queue by its own thread: the turns as three steps of a traced
    # run interleaved them, in no fixed order, one conversation's early turn as long as
    # another's later one
    steps = [[300, 200, 400, 400, 300, 500, 500, 600, 400, 600, 700, 500],
             [300, 400, 200, 300, 400, 500, 400, 600, 500, 500, 700, 600],
             [300, 200, 400, 400, 500, 600, 300, 500, 600, 400, 700, 500]]
    w = _shard(tmp_path)
    _stream(w, steps)
    (f,) = _of(_view(tmp_path, w), "prefix_resend")
    # each conversation resends its first 3 histories; the turns are linked from lengths
    # alone, so a turn may continue another conversation: near the hand's figure
    resent = sum(3 * p + 300 for p in (200, 300, 400)) * 8
    assert abs(f.bytes_per_step - resent) <= 0.1 * resent


def test_a_long_stream_of_random_lengths_is_no_resent_prefix(tmp_path):
    # one message per trajectory, 128 a step: rising runs appear by chance, as often backwards
    rng = random.Random(7)
    w = _shard(tmp_path)
    _stream(w, [[rng.randint(20, 500) for _ in range(128)] for _ in range(3)])
    assert _of(_view(tmp_path, w), "prefix_resend") == []


# -- chatty: a group's lengths repeating every step are still the pipeline's unit ------------
def test_groups_whose_lengths_repeat_every_step_are_not_chatty(tmp_path):
    w, t = _shard(tmp_path), 0
    for s in range(3):
        w.step(t, s)
        rng = random.Random(0)  # the same lengths each step
        for _ in range(16):
            t += 1
            w.hop(t, "sampler", "learner", "dict",
                  [tensor("prompt", (rng.randint(20, 80),), "int32"),
                   tensor("responses", (8, rng.randint(30, 200)), "int32"),
                   tensor("rewards", (8,))], step=s, transport="shm")
    assert _of(_view(tmp_path, w), "chatty") == []


# -- serialisation: pickled Python floats ------------------------------------------------------
def test_pickled_lists_of_floats_are_bloat_against_a_float32_array(tmp_path):
    w = _shard(tmp_path)
    w.step(0, 0)
    # 4,096 floats pickled at 9 B each (+ framing) where a float32 array holds 4 B each
    floats = ("logprobs[*][*]", "float", (), "", "", 4096 * 8, 4096, None)  # 8 B a number
    w.hop(1, "scorer", "learner", "dict", [floats], step=0, transport="pickle", nbytes=37_164)
    (f,) = _of(_view(tmp_path, w), "serialisation")
    assert f.bytes_per_step == 37_164 - 4096 * 4


def test_a_drop_without_ids_charges_the_message_taken_just_before_it_not_the_last_sent(tmp_path):
    # GIVEN two actors that put all their trajectories on one queue at once, each its own
    # size; the learner takes them later, actor/0's first, and drops actor/1's (stale) right
    # after taking each
    os.makedirs(tmp_path / "run", exist_ok=True)
    actors = [ShardWriter(str(tmp_path / "run" / f"h-{pid}-0001.flowmap.jsonl"), pid)
              for pid in (1, 2)]
    learner = ShardWriter(str(tmp_path / "run" / "h-3-0001.flowmap.jsonl"), 3)
    sizes = (4096, 1024)  # actor/0's and actor/1's trajectories
    for a, w in enumerate(actors):
        for s in range(2):  # actor/0 sends last: by send time, its messages come last
            leaf = tensor("obs", (sizes[a] // 4,))
            w.writer.send_half(20 - 10 * a + s, f"actor/{a}", "(untraced)", "dict", [leaf],
                               sizes[a], "", s, None, "pickle", items_json(None), "mp:q",
                               f"{a}-{s}", sizes[a])
    t = 100
    for a in (1, 0):  # taken: actor/1's, each dropped at once, then actor/0's, kept
        for s in range(2):
            learner.writer.receive_half(t, "learner", "dict", "pickle", "mp:q", f"{a}-{s}",
                                        sizes[a])
            if a == 1:
                learner.drop(t + 1, "learner", "stale", [])
            t += 10
    for w in actors:
        w.close(10**6)
    # THEN each drop is actor/1's message, taken just before it
    (f,) = _of(_view(tmp_path, learner), "dropped")
    assert f.seams == ["actor/1 -> learner : dict"]
    assert f.bytes_per_step == 2 * sizes[1] / 2


def test_a_transcript_resent_whole_as_text_is_a_resent_prefix_and_text_of_any_length_is_not(
        tmp_path):
    # GIVEN an agent resending each conversation's whole transcript (one string) every turn,
    # two conversations in turn, the engine answering 600 characters and a tool adding 200;
    # beside it, the fixed agent sending only each turn's new text, and a stream of
    # completions of random lengths
    rng = random.Random(11)
    for what in ("transcript", "deltas", "completions"):
        with flowmap.tracing(tmp_path / what):
            for step in range(3):
                flowmap.step(step)
                if what == "completions":
                    for _ in range(32):
                        flowmap.hop("engine", "trainer", {"text": "c" * rng.randint(20, 3000)},
                                    name="completion", transport="pickle")
                    continue
                history = ["p" * 2000, "q" * 1500]
                for _ in range(4):
                    for c in (0, 1):
                        sent = history[c] if what == "transcript" else history[c][-800:]
                        flowmap.hop("agent", "engine", {"messages": sent}, name="chat",
                                    transport="zmq")
                        answer = "a" * 600
                        flowmap.hop("engine", "agent", {"content": answer}, name="reply",
                                    transport="zmq")
                        history[c] += answer + "t" * 200
        found = _of(flowmap.load(str(tmp_path / what)).view, "prefix_resend")
        # THEN only the whole transcripts are resent: (2000 + 2800 + 3600) + (1500 + 2300 +
        # 3100) characters a step
        assert bool(found) is (what == "transcript"), (what, found)
        if found:
            assert found[0].bytes_per_step == 8400 + 6900, found


def test_leaves_of_one_name_and_different_ranks_on_a_seam_are_read_without_error(tmp_path,
                                                                                   capsys):
    # GIVEN a learner that sends each parameter as (name, array), `[1, 256]` and `[256]`
    # under one leaf path, step after step, in one process (shapes alone: no windows)
    w, t = _shard(tmp_path), 0
    for s in range(5):
        w.step(t, s)
        for shape in ((1, 256), (256,), (256,)):
            t += 1
            w.hop(t, "learner", "actor", "tuple", [tensor("[1]", shape)], step=s, transport="shm")
    # THEN the findings are read (no conversation among them), no detector failing
    assert _of(_view(tmp_path, w), "prefix_resend") == []
    assert "skipped" not in capsys.readouterr().err


def test_a_detector_that_fails_costs_its_own_findings_only(tmp_path, capsys, monkeypatch):
    import flowmap.findings as found

    def broken(view):
        raise IndexError("tuple index out of range")

    broken.__module__ = "flowmap.findings.prefix_resend"
    monkeypatch.setattr(found, "DETECTORS", (broken, *found.DETECTORS))
    w = _shard(tmp_path)
    for s in range(2):
        w.step(s, s)
        w.hop(s + 1, "a", "b", "stats", [tensor("x[*]", (4,), count=48)], step=s,
              transport="pickle", nbytes=15_000)  # 48 tensors of 16 B pickled: bloat
    kinds = [f.kind for f in found.findings(_view(tmp_path, w))]
    assert "serialisation" in kinds
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "`prefix_resend` findings were skipped" in err
