"""Detectors on the evidence every transport gives (shapes, wire bytes, sampled values).

Each pattern is written as a trace without the annotations only our examples
carry (no item ids, no `*mask*` leaf, no `range/` counter), with its fixed
control beside it. Figures are computed here from the sizes written.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from runs import ShardWriter, scalar, tensor

import flowmap
from flowmap.findings import findings
from flowmap.findings.chatty import MESSAGE_COST_BYTES


def _of(view, kind):
    return [f for f in findings(view) if f.kind == kind]


def _shard(tmp_path: Path) -> ShardWriter:
    os.makedirs(tmp_path / "run", exist_ok=True)
    return ShardWriter(str(tmp_path / "run" / "h-1-0001.flowmap.jsonl"), 1)


def _view(tmp_path: Path, w: ShardWriter):
    w.close(10**6)
    return flowmap.load(str(tmp_path / "run")).view


# -- prefix_resend from shapes ----------------------------------------------------------------
def test_interleaved_conversations_resend_their_prefix_without_item_ids(tmp_path):
    # GIVEN 3 conversations interleaved, 4 turns each, the whole conversation's ids every turn
    w, t = _shard(tmp_path), 0
    turn = (100, 130, 170)
    for s in range(2):
        w.step(t, s)
        for k in range(1, 5):
            for c in range(3):
                t += 1
                w.hop(t, "engine", "loop", "reply", [tensor("ids", (k * turn[c],), "int64")],
                      step=s, transport="pickle")
    (f,) = _of(_view(tmp_path, w), "prefix_resend")
    # each step resends turns 1..3 of each conversation: (1 + 2 + 3) x 400 tokens x 8 B
    assert f.bytes_per_step == 6 * sum(turn) * 8
    assert f.seams == ["engine -> loop : reply"] and "new rows" in f.message


def _turns(w: ShardWriter, conversations: int, windows_of) -> None:
    """Conversations interleaved, 4 turns each, every turn adding 64 more rows than the
    last (64, 192, 384, 640), pickled, never answered: their content windows as
    `windows_of(c, k, s, nbytes)` says (None: none written)."""
    t = 0
    for s in range(2):
        w.step(t, s)
        for k in range(1, 5):
            for c in range(conversations):
                t += 1
                rows = 32 * k * (k + 1)
                w.hop(t, "env", "agent", "obs", [tensor("obs", (rows,), "int64")], step=s,
                      transport="pickle")
                crcs = windows_of(c, k, s, rows * 8)
                if crcs is not None:
                    w.writer.content_windows(t, "env", "agent", "obs", [["obs", crcs]])


def test_content_windows_show_the_turns_of_a_resent_prefix_the_shapes_cannot(tmp_path):
    from flowmap import trace_format as tf

    def prefix(c: int, k: int, s: int, nbytes: int) -> list[int]:  # a conversation's own
        return [1000 * (10 * s + c) + at for at in tf.WINDOW_OFFSETS
                if at + tf.WINDOW_BYTES <= nbytes]

    # GIVEN one env worker alone on its seam resending its episode every turn, never
    # answered: by shapes, one stream that only grows (sorted micro-batches look so)
    w = _shard(tmp_path / "shapes")
    _turns(w, 1, lambda *_: None)
    assert _of(_view(tmp_path / "shapes", w), "prefix_resend") == []
    # WHEN its arrays were pickled, their windows agreeing turn to turn
    w = _shard(tmp_path / "content")
    _turns(w, 1, prefix)
    (f,) = _of(_view(tmp_path / "content", w), "prefix_resend")
    # THEN it is a resent prefix: turns 1..3 again each step, (64 + 192 + 384) rows x 8 B
    assert f.bytes_per_step == (64 + 192 + 384) * 8
    # and three conversations interleaved are each found by their own content
    w = _shard(tmp_path / "three")
    _turns(w, 3, prefix)
    (f,) = _of(_view(tmp_path / "three", w), "prefix_resend")
    assert f.bytes_per_step == 3 * (64 + 192 + 384) * 8


def test_replies_that_rise_by_chance_hold_no_answer_and_are_no_turns(tmp_path):
    # GIVEN an engine's replies to one worker, two episodes interleaved, whose lengths rise
    # (10, 20, 30, 40 and 50, 60, 70, 80), each followed by the worker's next request of 200
    # new tokens: a reply never holds the request before it (each grows by 10 only)
    for answered in (False, True):
        w, t = _shard(tmp_path / str(answered)), 0
        for s in range(3):
            w.step(t, s)
            for k in range(4):
                for n in (10 * (k + 1), 50 + 10 * k):
                    t += 2
                    w.hop(t, "engine", "env", "reply", [tensor("ids", (n,), "int64")], step=s,
                          transport="pickle")
                    ask = 8 if answered else 200  # what the next turn adds holds it, or not
                    w.hop(t + 1, "env", "engine", "request", [tensor("ids", (ask,), "int64")],
                          step=s, transport="pickle")
        got = _of(_view(tmp_path / str(answered), w), "prefix_resend")
        # THEN rises that hold no answer are chance; those that hold it are turns
        assert bool(got) is answered, (answered, got)


def test_new_turns_of_varied_lengths_are_no_resent_prefix(tmp_path):
    # GIVEN the fix: each turn sends its new tokens only, lengths sampled
    w, t, rng = _shard(tmp_path), 0, random.Random(5)
    for s in range(3):
        w.step(t, s)
        for _ in range(24):
            t += 1
            w.hop(t, "engine", "loop", "reply", [tensor("ids", (rng.randint(50, 600),), "int64")],
                  step=s, transport="pickle")
    assert _of(_view(tmp_path, w), "prefix_resend") == []


def _one_conversation(tmp_path: Path, answer: tuple[int, ...] | None):
    """A worker alone on its seam: 4 turns a step of 512, 1024, ... ids, each after the
    engine's `answer` (None: no answer at all)."""
    w, t = _shard(tmp_path), 0
    for s in range(3):
        w.step(t, s)
        for k in range(1, 5):
            t += 10
            w.hop(t, "worker", "engine", "turn", [tensor("input_ids", (512 * k,), "int64")],
                  step=s, transport="pickle")
            if answer is not None:
                w.hop(t + 5, "engine", "worker", "out", [tensor("", answer, "int64")],
                      step=s, transport="pickle")
    return _view(tmp_path, w)


def test_one_conversation_alone_on_its_seam_resends_its_prefix(tmp_path):
    # GIVEN each turn comes after the engine's 384-token answer, and holds it
    (f,) = _of(_one_conversation(tmp_path, (384,)), "prefix_resend")
    assert f.bytes_per_step == (1 + 2 + 3) * 512 * 8


def test_growing_messages_answered_by_a_count_are_no_conversation(tmp_path):
    # GIVEN the same growth, answered by one int64 (a count of tokens consumed), or not at all:
    # micro-batches sorted by length
    assert _of(_one_conversation(tmp_path / "count", (1,)), "prefix_resend") == []
    assert _of(_one_conversation(tmp_path / "none", None), "prefix_resend") == []


def _lockstep(tmp_path: Path, answer: tuple[int, ...] | None, header: bool = False):
    """3 conversations in lockstep (turn k of each before turn k+1 of any), prompts 40, 48
    and 56 ids, each turn 48 more, every reply the whole conversation; each request the
    agent sends between is 16 new ids (`answer`; None: the engine is not asked). With
    `header`, a `[1]` length goes ahead of each reply (`dist.send` carries no shape)."""
    w, t = _shard(tmp_path), 0
    for s in range(3):
        w.step(t, s)
        for k in range(4):
            for c in range(3):
                if answer is not None:
                    t += 5
                    w.hop(t, "agent", "engine", "req", [tensor("tokens", answer, "int64")],
                          step=s, transport="zmq")
                if header:
                    t += 1
                    w.hop(t, "engine", "agent", "rep", [tensor("", (1,), "int64")],
                          step=s, transport="zmq")
                t += 5
                w.hop(t, "engine", "agent", "rep", [tensor("ids", (40 + 8 * c + 48 * (k + 1),),
                                                           "int64")], step=s, transport="zmq")
    return _view(tmp_path, w)


def test_conversations_in_lockstep_that_only_grow_are_found_by_their_answered_turns(tmp_path):
    # GIVEN replies that rise within each step (88, 96, 104, 136, ...): sorted, by their sizes
    (f,) = _of(_lockstep(tmp_path / "asked", (16,)), "prefix_resend")
    # THEN turns 1..3 of each are resent: 3 x (40 + 48 + 56) + (1 + 2 + 3) x 3 x 48 ids, 8 B
    assert f.bytes_per_step == (3 * 144 + 6 * 3 * 48) * 8
    # a length ahead of each reply is no turn of its own, and breaks no chain
    (g,) = _of(_lockstep(tmp_path / "headers", (16,), header=True), "prefix_resend")
    assert g.bytes_per_step == f.bytes_per_step
    # the same sizes never answered: a stream sorted by length
    assert _of(_lockstep(tmp_path / "unasked", None), "prefix_resend") == []


def test_a_batch_of_one_grows_along_its_second_dim(tmp_path):
    w, t = _shard(tmp_path), 0
    w.step(t, 0)
    for k in range(1, 5):
        for c in (200, 300):
            t += 1
            w.hop(t, "server", "client", "out", [tensor("input_ids", (1, k * c), "int64")],
                  step=0, transport="zmq")
    (f,) = _of(_view(tmp_path, w), "prefix_resend")
    assert f.bytes_per_step == (1 + 2 + 3) * 500 * 8


# -- chatty: a transfer cut into pieces, not the pipeline's unit ------------------------------
def _params() -> list[list[tuple]]:
    out = []
    for _ in range(10):
        out += [[scalar("[0]", "str"), tensor("[1]", (64, 64))], [scalar("[0]", "str"),
                                                              tensor("[1]", (64,))]]
    return out


def test_weight_sync_of_unlike_parameters_is_chatty(tmp_path):
    w, t = _shard(tmp_path), 0
    for s in range(3):
        w.step(t, s)
        for leaves in _params():
            t += 1
            w.hop(t, "trainer", "engine", "tuple", leaves, step=s, transport="zmq")
    (f,) = _of(_view(tmp_path, w), "chatty")
    assert f.bytes_per_step == 19 * MESSAGE_COST_BYTES and "20 messages per step" in f.message


def test_one_message_per_group_is_not_chatty(tmp_path):
    # GIVEN 32 GRPO groups a step, each [8, its longest], lengths sampled; or all alike
    w, t, rng = _shard(tmp_path), 0, random.Random(1)
    for s in range(3):
        w.step(t, s)
        for _ in range(32):
            t += 1
            n = rng.randint(64, 1024)
            w.hop(t, "rollout", "trainer", "group",
                  [tensor("input_ids", (8, n), "int64"), tensor("rewards", (8,))],
                  step=s, transport="shm")
            w.hop(t, "rollout", "buffer", "traj", [tensor("ids", (512,), "int64")],
                  step=s, transport="pickle")
    assert _of(_view(tmp_path, w), "chatty") == []


def test_a_broadcast_per_parameter_is_one_chatty_finding_at_its_root(tmp_path):
    # GIVEN a weight sync as one `broadcast` per parameter: the root's hops to its group and
    # the other rank's receipts of the same messages
    os.makedirs(tmp_path / "run", exist_ok=True)
    ranks = [ShardWriter(str(tmp_path / "run" / f"h-{pid}-0001.flowmap.jsonl"), pid)
             for pid in (1, 2)]
    t = 0
    for s in range(3):
        for w in ranks:
            w.step(t, s)
        for leaves in _params():
            t += 1
            ranks[0].hop(t, "trainer/rank0", "group[0,1]", "broadcast", leaves[1:], step=s,
                         transport="collective")
            ranks[1].hop(t, "group[0,1]", "rollout/rank1", "broadcast", leaves[1:], step=s,
                         transport="collective")
    for w in ranks:
        w.close(10**6)
    # THEN one finding, at the root: the receipts are those messages, not a second stream
    (f,) = _of(flowmap.load(str(tmp_path / "run")).view, "chatty")
    assert f.seams == ["trainer/rank0 -> group[0,1] : broadcast"]
    assert f.bytes_per_step == 19 * MESSAGE_COST_BYTES


def test_requests_the_receiver_answers_with_data_are_turns_not_a_transfer_cut_up(tmp_path):
    # GIVEN 16 requests a step, the first of each conversation with its prompt (other
    # leaves), each answered by the engine with the conversation's tokens; and the same
    # requests answered by `None`-sized acknowledgements
    for answered in (True, False):
        w, t = _shard(tmp_path / str(answered)), 0
        for s in range(3):
            w.step(t, s)
            for k in range(16):
                t += 2
                leaves = [scalar("rid", "str")] + (
                    [tensor("prompt", (32 + 40 * (k % 4),), "int32")] if k < 4 else
                    [tensor("prompt", (64, 64)), tensor("bias", (64,))][: 1 + k % 2])
                w.hop(t, "agent", "engine", "dict", leaves, step=s, transport="zmq")
                reply = (4096 * (1 + k // 4),) if answered else (1,)
                w.hop(t + 1, "engine", "agent", "dict", [tensor("ids", reply, "int32")],
                      step=s, transport="zmq")
        got = _of(_view(tmp_path / str(answered), w), "chatty")
        # THEN turns answered with data are a conversation; acknowledged pieces stay chatty
        assert (got == []) is answered, (answered, got)


def test_a_length_header_before_each_unit_makes_no_unlike_pieces(tmp_path):
    # GIVEN 16 sequences a step through `dist.send`, each after a `[1]` int64 of its length
    w, t, rng = _shard(tmp_path), 0, random.Random(3)
    for s in range(3):
        w.step(t, s)
        for _ in range(16):
            n = rng.choice((128, 256, 384))
            t += 1
            w.hop(t, "rollout", "trainer", "send", [tensor("", (1,), "int64")], step=s,
                  transport="collective")
            t += 1
            w.hop(t, "rollout", "trainer", "send", [tensor("", (n, 4, 2), "uint8")], step=s,
                  transport="collective")
    assert _of(_view(tmp_path, w), "chatty") == []


def test_a_shape_header_before_each_micro_batch_makes_no_unlike_pieces(tmp_path):
    # GIVEN pipeline stages (Megatron's p2p) sending 24 micro-batches a step, each after an
    # int64 `[3]` of its shape, the activations' sequence length varying; and a weight sync
    # sending 24 parameters of unlike shapes a step, each after its `[3]` shape too
    for what in ("activations", "weights"):
        w, t, rng = _shard(tmp_path / what), 0, random.Random(5)
        for s in range(3):
            w.step(t, s)
            for i in range(24):
                shape = ((2, rng.choice((512, 768, 1024)), 64) if what == "activations"
                         else ((256, 64, 4), (64, 4, 1), (4, 1, 1))[i % 3])
                for leaf in (tensor("", (3,), "int64"), tensor("", shape)):
                    t += 1
                    w.hop(t, "stage0", "stage1", "send", [leaf], step=s,
                          transport="collective")
        found = _of(_view(tmp_path / what, w), "chatty")
        # THEN each header goes ahead of its unit: no transfer cut up; the parameters are
        # pieces, 24 a step, the headers not counted
        assert bool(found) is (what == "weights"), (what, found)
        assert all("24 messages per step" in f.message for f in found)


def test_length_headers_are_not_counted_as_messages_nor_replies(tmp_path):
    # GIVEN 12 turns a step through `dist.send`, each a `[2]` header then the new tokens
    # (unlike pieces: a prompt's length, then 32-token observations), each answered by a
    # header and 64 tokens: fewer bytes than the requests, but data, not acknowledgements
    w, t = _shard(tmp_path), 0
    for s in range(3):
        w.step(t, s)
        for k in range(12):
            for src, dst, n in (("agent", "engine", (200, 350, 280)[k] if k < 3 else 32),
                                ("engine", "agent", 64)):
                t += 1
                w.hop(t, src, dst, "send", [tensor("", (2,), "int64")], step=s,
                      transport="collective")
                t += 1
                w.hop(t, src, dst, "send", [tensor("", (n,), "int64")], step=s,
                      transport="collective")
    # THEN 12 turns a step, each answered, are no transfer cut up (24 messages with headers)
    assert _of(_view(tmp_path, w), "chatty") == []


def _raw(path: str, n: int) -> tuple:
    return (path, "bytes", (n,), "", "", n, 1, None)


def test_weight_sync_as_raw_bytes_is_chatty_by_its_repeated_sizes(tmp_path):
    # GIVEN 8 layers sent as `(name, tobytes())` per parameter: a weight, a bias, a norm;
    # the bytes have only a length, and the names' lengths vary with the layer
    w, t = _shard(tmp_path), 0
    for s in range(3):
        w.step(t, s)
        for layer in range(8):
            for name, n in (("weight", 16384), ("bias", 256), ("norm.weight", 512)):
                t += 1
                leaves = [_raw("[0]", len(f"h.{layer}.{name}")), _raw("[1]", n)]
                w.hop(t, "trainer", "engine", "tuple", leaves, step=s, transport="pickle")
    (f,) = _of(_view(tmp_path, w), "chatty")
    assert f.bytes_per_step == 23 * MESSAGE_COST_BYTES and "24 messages per step" in f.message


def test_raw_bytes_of_one_unit_each_are_not_chatty_even_in_few_sizes(tmp_path):
    # GIVEN the fix's stream: 16 groups a step as raw bytes, the same lengths each step;
    # sampled lengths (about one per message), or padded to a few buckets close in size
    w, t = _shard(tmp_path), 0
    for s in range(3):
        w.step(t, s)
        rng = random.Random(0)
        for _ in range(16):
            t += 1
            w.hop(t, "sampler", "learner", "frames", [_raw("[*]", 4 * rng.randint(300, 1600))],
                  step=s, transport="zmq")
            w.hop(t, "sampler", "buffer", "padded", [_raw("", 4 * 64 * rng.choice((3, 4, 5)))],
                  step=s, transport="zmq")
    assert _of(_view(tmp_path, w), "chatty") == []


# -- serialisation: wire bytes far above the payload's own ------------------------------------
def test_an_object_broadcasts_bloat_is_one_finding_at_its_root(tmp_path):
    # GIVEN `broadcast_object_list` of 64 small tensors: the root's hop to its group and the
    # other rank's receipt of the same pickled message, 18,432 B of wire each
    os.makedirs(tmp_path / "run", exist_ok=True)
    ranks = [ShardWriter(str(tmp_path / "run" / f"h-{pid}-0001.flowmap.jsonl"), pid)
             for pid in (1, 2)]
    small = tensor("[*]", (16,), count=64)  # 4,096 B of its own
    for s in range(3):
        ranks[0].hop(10 * s, "driver/rank0", "group[0,1]", "broadcast_object_list", [small],
                     step=s, transport="collective", nbytes=18_432 + 4096)
        ranks[1].hop(10 * s + 1, "group[0,1]", "worker/rank1", "broadcast_object_list", [small],
                     step=s, transport="collective", nbytes=18_432 + 4096)
    for w in ranks:
        w.close(10**6)
    # THEN one finding, at the root: the receipt is that message, not a second bloat
    (f,) = _of(flowmap.load(str(tmp_path / "run")).view, "serialisation")
    assert f.seams == ["driver/rank0 -> group[0,1] : broadcast_object_list"]
    assert f.bytes_per_step == 18_432


def test_wire_bytes_far_above_the_payload_are_bloat_whatever_the_array_size(tmp_path):
    w, t = _shard(tmp_path), 0
    for s in range(2):
        w.step(t, s)
        t += 1
        # 48 tensors of 16 B pickled into 15,000 B; a 256 KiB array pickled into 256 KiB + 200 B
        w.hop(t, "trainer", "rollout", "stats", [tensor("x[*]", (4,), count=48)], step=s,
              transport="pickle", nbytes=15_000)
        w.hop(t, "trainer", "rollout", "big", [tensor("x", (1 << 16,))], step=s,
              transport="pickle", nbytes=(1 << 18) + 200)
    (f,) = _of(_view(tmp_path, w), "serialisation")
    assert f.bytes_per_step == 15_000 - 48 * 16 and f.seams == ["trainer -> rollout : stats"]


def test_a_pickled_list_of_numpy_scalars_is_bloat_against_its_array(tmp_path):
    # GIVEN `[np.float32(x) for x in scores]`: 1,024 numpy scalars, each pickled with its dtype
    w, t = _shard(tmp_path), 0
    scores = [("scores[*]", "scalar", (), "float32", "", 4096, 1024, None)]
    for s in range(2):
        w.step(t, s)
        t += 1
        w.hop(t, "reward", "trainer", "dict", scores, step=s, transport="pickle", nbytes=15_476)
    (f,) = _of(_view(tmp_path, w), "serialisation")
    # THEN the pickle is priced against the float32 array of the same numbers
    assert f.bytes_per_step == 15_476 - 4096


def test_numbers_written_as_text_are_priced_against_a_float32_array_and_prose_is_not(tmp_path):
    # GIVEN 8 strings a step of 10,240 characters: one seam's holding 512 numbers each (the
    # transport read number text in its frame), the other's a completion's words
    w, t = _shard(tmp_path), 0
    text = [("", "str", (10_240,), "", "", 10_240, 1, None)]
    for s in range(2):
        w.step(t, s)
        for _ in range(8):
            t += 1
            for name in ("advantages", "completion"):
                w.hop(t, "reward", "trainer", name, text, step=s, transport="pickle",
                      nbytes=10_260)
            w.writer.leaf_notes(t, "reward", "(untraced)", "advantages", "pickle", s,
                                [["", 10_240, None, None, 512]])
    (f,) = _of(_view(tmp_path, w), "serialisation")
    # THEN the numbers' seam is bloat: 8 x (10,260 B crossed - 512 x 4 B a float32 array)
    assert f.seams == ["reward -> trainer : advantages"]
    assert f.bytes_per_step == 8 * (10_260 - 512 * 4)


def _frames_relay(tmp_path: Path, frame_bytes: int, verbatim: bool):
    """An engine's raw frames (two a step) through a bridge process to a trainer: the
    bridge names what it receives (a sample kept) and, where it sends those very bytes
    on, its send carries that id (`relay_bytes`)."""
    os.makedirs(tmp_path / "run", exist_ok=True)
    engine, bridge = (ShardWriter(str(tmp_path / "run" / f"h-{pid}-0001.flowmap.jsonl"), pid)
                      for pid in (1, 2))
    leaf = [("", "bytes", (frame_bytes,), "", "", frame_bytes, 1, None)]
    for s in range(3):
        for i in range(2):
            t, k = 100 * s + 10 * i, f"{s}-{i}"
            engine.writer.send_half(t, "engine", "(untraced)", "bytes", leaf, frame_bytes, "", s,
                                    None, "pickle", "null", "mp:a", k, frame_bytes)
            sid = str(2 * s + i)
            bridge.writer.receive_half(t + 1, "bridge", "bytes", "pickle", "mp:a", k, frame_bytes,
                                       sid)
            bridge.writer.send_half(t + 2, "bridge", "trainer", "bytes", leaf, frame_bytes,
                                    sid if verbatim else "", s, None, "pickle", "null", "mp:b",
                                    k, frame_bytes)
    engine.close(10**6)
    bridge.close(10**6)
    return flowmap.load(str(tmp_path / "run")).view


def test_raw_frames_sent_on_verbatim_pass_through_and_frames_computed_anew_do_not(tmp_path):
    # GIVEN 128 KiB frames: relayed as they came (their receipt's id carried on), and, in
    # the control, frames of the same sizes the bridge computed (no id: new content)
    (f,) = _of(_frames_relay(tmp_path / "relay", 1 << 17, verbatim=True), "pass_through")
    assert "same storage" in f.message and f.bytes_per_step == 2 * (1 << 17)
    assert _of(_frames_relay(tmp_path / "fixed", 1 << 17, verbatim=False), "pass_through") == []
    # frames too small to be sampled leave the schema as the only evidence (a documented limit)
    (f,) = _of(_frames_relay(tmp_path / "small", 1 << 12, verbatim=False), "pass_through")
    assert "same leaf schema" in f.message


# -- padding and wide ids from sampled values -------------------------------------------------
def _values(w: ShardWriter, t: int, s: int, name: str, figures: list[list]) -> None:
    w.writer.value_figures(t, "rollout", "trainer", name, "pickle", s, figures)


def test_zero_tails_sampled_with_values_are_padding_without_a_mask(tmp_path):
    w = _shard(tmp_path)
    leaves = [tensor("input_ids", (4, 100), "int64"), tensor("logprobs", (4, 100))]
    for s in range(2):
        w.step(s * 10, s)
        w.hop(s * 10 + 1, "rollout", "trainer", "batch", leaves, step=s, transport="pickle")
        _values(w, s * 10 + 2, s, "batch", [["input_ids", 0, 150_000, None, 250, 400],
                                           ["logprobs", -3.5, 0.0, None, 250, 400]])
    (f,) = _of(_view(tmp_path, w), "padding")
    assert f.bytes_per_step == 400 * 12 * 250 / 400 and "zero tails sampled with --values" \
        in f.message


def test_a_list_of_lengths_sampled_with_values_gives_the_padding(tmp_path):
    w = _shard(tmp_path)
    leaves = [tensor("tokens", (4, 100), "int32"), scalar("lengths[*]", "int")]
    w.step(0, 0)
    w.hop(1, "rollout", "trainer", "batch", leaves, step=0, transport="zmq")
    _values(w, 2, 0, "batch", [["tokens", 3, 151_643, None, 0, 400],
                               ["lengths[*]", 10, 90, 200, None, 4]])
    (f,) = _of(_view(tmp_path, w), "padding")
    assert f.bytes_per_step == 400 * 4 * (1 - 200 / 400) and "list of lengths" in f.message


def test_a_prompt_mask_in_a_packed_row_is_not_padding(tmp_path):
    # the mask's positions before its trailing zeros, as the tracer counts them: all of them
    import torch

    from flowmap.capture.leaf_notes import collect

    mask = torch.cat([torch.zeros(60), torch.ones(300), torch.zeros(45), torch.ones(80)])[None]
    ((path, _, _, real),) = collect({"loss_mask": mask})
    assert path == "loss_mask" and real == mask.numel()
    padded = torch.zeros(2, 10)
    padded[0, :4] = 1
    padded[1, 2:7] = 1  # a loss mask's left zeros are a prompt, no padding; its right tail is
    assert collect({"loss_mask": padded})[0][3] == 4 + 7
    # an attention mask's zeros hold no token at either end (verl: left-padded prompts
    # beside right-padded responses): both are padding
    assert collect({"attention_mask": padded})[0][3] == 4 + 5
    assert collect({"attention_mask": padded.numpy()})[0][3] == 4 + 5


def test_views_are_noted_inside_tuples_lists_and_named_tuples_once_a_view_pickled():
    # a view sent as `(step, chunk)` or in a list of samples carries its storage as surely as
    # one in a dict; pickle writes the storage once a view, shared memory moves it once
    import pickle
    from collections import namedtuple

    import torch

    from flowmap.capture.leaf_notes import collect

    big = torch.randn(100, 10)  # 4,000 B
    assert collect((3, big[:1])) == [["[1]", 40, 4000, None]]
    samples = [{"step": 1, "row": big[i:i + 1]} for i in (3, 70)]
    assert len(pickle.dumps(samples)) > 2 * 4000  # torch's own pickle: the storage twice
    assert collect(samples) == [["[*].row", 40, 4000, None], ["[*].row", 40, 4000, None]]
    assert collect(samples, "shm") == [["[*].row", 40, 4000, None]]
    pair = namedtuple("pair", "step row")
    assert collect(pair(1, big[5:6])) == [["row", 40, 4000, None]]
    other = torch.randn(5, 5)
    assert collect([big[:1], other[:1]]) == [["[*]", 40, 4000, None], ["[*]", 20, 100, None]]
    assert collect([big[:1].clone(), (big.clone(),)]) == []


def test_ids_sampled_within_eight_bits_are_wide_and_tokens_masks_are_not(tmp_path):
    w = _shard(tmp_path)
    leaves = [tensor("experts", (512, 8), "int64"), tensor("input_ids", (1, 512), "int64"),
              tensor("mask", (1, 512), "int64"), tensor("positions", (1, 512), "int64")]
    w.step(0, 0)
    w.hop(1, "rollout", "trainer", "batch", leaves, step=0, transport="pickle")
    _values(w, 2, 0, "batch", [["experts", 0, 63, None, 0, 4096],
                               ["input_ids", 5, 150_000, None, 0, 512],
                               ["mask", 0, 1, None, 0, 512], ["positions", 0, 511, None, 0, 512]])
    (f,) = _of(_view(tmp_path, w), "wide_ids")
    assert f.bytes_per_step == 512 * 8 * 8 * 7 / 8 and "uint8" in f.message
    assert "--values" in f.message


def test_two_wide_leaves_of_one_seam_are_one_finding_their_savings_summed(tmp_path):
    # GIVEN a byte-level tokenizer's int64 ids and the labels shifted from them, 0..122
    w = _shard(tmp_path)
    leaves = [tensor("input_ids", (32, 512), "int64"), tensor("labels", (32, 512), "int64")]
    w.step(0, 0)
    w.hop(1, "rollout", "trainer", "batch", leaves, step=0, transport="pickle")
    _values(w, 2, 0, "batch", [["input_ids", 32, 122, None, 0, 16384],
                               ["labels", 32, 122, None, 0, 16384]])
    (f,) = _of(_view(tmp_path, w), "wide_ids")
    # THEN one claim names both, at both leaves' savings (not the first said, the other lost)
    assert f.bytes_per_step == 2 * 32 * 512 * 8 * 7 / 8
    assert "`input_ids`" in f.message and "`labels`" in f.message


# -- dropped without item ids -----------------------------------------------------------------
def test_a_drop_without_ids_charges_the_message_that_brought_it(tmp_path):
    w = _shard(tmp_path)
    w.step(0, 0)
    for i in range(4):
        w.hop(10 + i * 10, "rollout", "learner", "traj", [tensor("tokens", (1000 + i,), "int64")],
              step=0, transport="pickle")
        if i in (1, 3):
            w.drop(15 + i * 10, "learner", "stale", [])
    (f,) = _of(_view(tmp_path, w), "dropped")
    assert f.bytes_per_step == (1001 + 1003) * 8 and "2 messages" in f.message


def test_a_numpy_mask_is_read_from_its_sampled_zero_tails(tmp_path):
    # a mask the tracer does not count (numpy, not torch): its zero tails under --values
    w = _shard(tmp_path)
    leaves = [tensor("input_ids", (4, 100), "int64"), tensor("attention_mask", (4, 100), "int64")]
    w.step(0, 0)
    w.hop(1, "rollout", "trainer", "batch", leaves, step=0, transport="pickle")
    _values(w, 2, 0, "batch", [["attention_mask", 0, 1, None, 100, 400]])
    (f,) = _of(_view(tmp_path, w), "padding")
    assert f.bytes_per_step == 400 * 16 / 4 and "the mask's zero tails" in f.message


def test_scalar_dicts_and_views_are_no_serialisation_bloat(tmp_path):
    w = _shard(tmp_path)
    w.step(0, 0)
    # metadata of 40 scalars pickled with their keys: no numbers to stack into an array
    w.hop(1, "rollout", "trainer", "meta", [scalar(f"k{i}") for i in range(40)], step=0,
          transport="pickle", nbytes=2_000)
    # a 4 KiB row of a 4 MiB storage pickled whole: the `view` finding's, not an encoding's
    w.hop(2, "actor", "learner", "row", [tensor("row", (1024,))], step=0, transport="zmq",
          nbytes=4 << 20)
    w.writer.leaf_notes(2, "actor", "learner", "row", "zmq", 0, [["row", 4096, 4 << 20, None]])
    view = _view(tmp_path, w)
    assert _of(view, "serialisation") == [] and len(_of(view, "view")) == 1


# -- the same storage in several messages to one destination ------------------------------------
def _samples(tmp_path, transport, *, image_each_time=False, alone=False):
    w = _shard(tmp_path)
    sid = iter(range(1, 10_000))
    for s in range(2):
        w.step(s * 100, s)
        image = next(sid)
        for i in range(8):
            img = next(sid) if image_each_time else image
            leaves = [tensor("pixel_values", (3, 112, 112))]
            storages = (img,)
            if not alone:
                leaves.append(tensor("tokens", (256,), "int64"))
                storages = (img, next(sid))
            w.hop(s * 100 + i + 1, "rollout", "trainer", "sample", leaves, storages=storages,
                  step=s, transport=transport)
    return _of(_view(tmp_path, w), "duplicate")


def test_an_image_serialised_into_each_sample_of_a_group_is_a_duplicate(tmp_path):
    (f,) = _samples(tmp_path / "a", "zmq")
    assert f.bytes_per_step == 7 * 3 * 112 * 112 * 4 and "pixel_values" in f.message
    assert _samples(tmp_path / "b", "pickle")


def test_no_duplicate_for_shared_memory_fresh_images_or_a_buffer_sent_alone(tmp_path):
    assert _samples(tmp_path / "shm", "shm") == []  # moved once, handles after
    assert _samples(tmp_path / "fresh", "zmq", image_each_time=True) == []
    assert _samples(tmp_path / "alone", "zmq", alone=True) == []  # a buffer refilled in place?


def test_an_executors_tasks_with_the_whole_batch_are_copies_on_one_worker_or_two(tmp_path):
    # GIVEN a ProcessPoolExecutor's two tasks a step, each with the whole batch and its shard
    # index; step 0's go to two workers, step 1's both to one (whichever was free)
    w = _shard(tmp_path)
    leaves = [tensor("args[0].ids", (64, 512), "int32"), scalar("args[1]", "int")]
    for s, workers in enumerate((("process_pool/0", "process_pool/1"),
                                 ("process_pool/1", "process_pool/1"))):
        w.step(s * 10, s)
        for k, dst in enumerate(workers):
            w.hop(s * 10 + 1 + k, "driver", dst, "_CallItem", leaves, storages=(s,), step=s,
                  transport="pickle")
    (f,) = _of(_view(tmp_path, w), "duplicate")
    # THEN one copy too many every step (the batch and its 8 B index), whichever worker took them
    assert f.bytes_per_step == 64 * 512 * 4 + 8


def _scatter(tmp_path, storages):
    w = _shard(tmp_path)
    for s in range(2):
        w.step(s * 10, s)
        w.hop(s * 10 + 1, "trainer/rank0", "group[0,1]", "scatter_object_list",
              [scalar("[*].rank", "int"), tensor("[*].input_ids", (64, 1024), "int64", count=2)],
              storages=tuple(100 * s + k for k in storages), step=s, transport="collective")
    return _of(_view(tmp_path, w), "duplicate")


def test_a_scatter_whose_slots_wrap_the_same_tensor_is_a_duplicate(tmp_path):
    # each rank's slot its own small dict around the whole batch: the same storage twice
    (f,) = _scatter(tmp_path / "same", (1, 1))
    # what rank 1 got beyond its half: the root's own slot never leaves it
    assert f.bytes_per_step == (2 * 64 * 1024 * 8 + 8) / 2 * (1 - 1 / 2)
    assert _scatter(tmp_path / "parts", (1, 2)) == []  # each slot its own rows


def test_one_socket_per_rank_is_one_role_level_seam():
    # a socket per rank names each seam by its endpoint: one seam per role all the same
    from flowmap.findings.common import role_key

    assert role_key(("driver", "actor/0", "PUSH ipc:///tmp/run/drv_0")) == role_key(
        ("driver", "actor/1", "PUSH ipc:///tmp/run/drv_1")) == (
        "driver", "actor", "PUSH ipc:///tmp/run/drv_*")
    assert role_key(("a", "b", "PULL tcp://127.0.0.1:5556"))[2] == "PULL tcp://*.*.*.*:*"
    # a payload's own name keeps its numbers: `layer3` and `layer4` are two payloads
    assert role_key(("a", "b/2", "layer3")) == ("a", "b", "layer3")


def test_one_shared_memory_storage_read_whole_by_stages_of_different_roles_is_no_duplicate(tmp_path):
    # GIVEN a batch moved into shared memory once and handed to three reward functions that
    # each read every row; beside it, the same to three data-parallel ranks of one role
    w, t = _shard(tmp_path), 0
    for s in range(2):
        w.step(t, s)
        for dst in ("reward_correct", "reward_format", "reward_length"):
            t += 1
            w.hop(t, "policy", dst, "tuple", [tensor("[1]", (64, 256), "int32")], step=s,
                  transport="shm", storages=(2 * s,))
        for rank in range(3):
            t += 1
            w.hop(t, "driver", f"trainer/rank{rank}", "batch", [tensor("ids", (64, 256), "int32")],
                  step=s, transport="shm", storages=(2 * s + 1,))
    (f,) = _of(_view(tmp_path, w), "duplicate")
    # THEN only the ranks' copies are found: the rewards' one copy is what they need
    assert all(label.startswith("driver -> trainer") for label in f.seams), f.seams


def test_micro_batches_sorted_by_length_answered_by_a_critics_values_are_no_conversation(tmp_path):
    # GIVEN 4 micro-batches a step, each more than twice the last, each answered by values of
    # its own length ([1, N] float32, the message's dtype and rows)
    w, t = _shard(tmp_path), 0
    for s in range(3):
        w.step(t, s)
        for n in (300, 900, 2500, 7000):
            t += 10
            w.hop(t, "actor", "critic", "dict", [tensor("old_logprobs", (1, n))], step=s,
                  transport="pickle")
            w.hop(t + 5, "critic", "actor", "values", [tensor("", (1, n))], step=s,
                  transport="pickle")
    assert _of(_view(tmp_path, w), "prefix_resend") == []


def test_one_token_a_message_is_chatty_and_acknowledged_data_is_not(tmp_path):
    # GIVEN an engine streaming each token as (request, position, id, log-prob), 64 a step,
    # unanswered; beside it, one trajectory a message, each acknowledged by a scalar
    w, t = _shard(tmp_path), 0
    for s in range(3):
        w.step(t, s)
        for k in range(64):
            t += 3
            w.hop(t, "engine", "collector", "tuple",
                  [scalar("[0]", "int"), scalar("[1]", "int"), scalar("[2]", "int"),
                   scalar("[3]", "float")], step=s, transport="pickle")
            if k < 32:
                w.hop(t + 1, "rollout", "trainer", "traj", [tensor("ids", (512,), "int32")],
                      step=s, transport="pickle")
                w.hop(t + 2, "trainer", "rollout", "int", [scalar("", "int")], step=s,
                      transport="pickle")
    (f,) = _of(_view(tmp_path, w), "chatty")
    # THEN the token stream is, bucketed into one message a step; the acknowledgements are
    # answers to data, not a stream of their own
    assert f.seams == ["engine -> collector : tuple"]
    assert f.bytes_per_step == 63 * MESSAGE_COST_BYTES


def test_a_vectorised_envs_episodes_side_by_side_grow_along_their_second_dim(tmp_path):
    # GIVEN an env of 4 episodes returning their whole history [4, L] each turn, after the
    # agent's actions [4, 8]; and padded batches [8, T] of sampled lengths, one a message
    for answered in (True, False):
        w, t, rng = _shard(tmp_path / str(answered)), 0, random.Random(7)
        for s in range(3):
            w.step(t, s)
            for k in range(4):
                if answered:
                    t += 5
                    w.hop(t, "agent", "env", "act", [tensor("", (4, 8), "int64")], step=s,
                          transport="zmq")
                    t += 5
                    w.hop(t, "env", "agent", "obs", [tensor("history", (4, 64 + 24 * k), "int64")],
                          step=s, transport="zmq")
                else:
                    for _ in range(6):
                        t += 5
                        w.hop(t, "collator", "trainer", "batch",
                              [tensor("ids", (8, rng.randint(100, 900)), "int64")], step=s,
                              transport="zmq")
        found = _of(_view(tmp_path / str(answered), w), "prefix_resend")
        if answered:
            # THEN turns 1..3 of the 4 episodes are resent: (64 + 88 + 112) x 4 ids x 8 B
            (f,) = found
            assert f.bytes_per_step == (64 + 88 + 112) * 4 * 8
        else:  # padded batches of sampled lengths are no conversations
            assert found == [], found


def test_groups_whose_lengths_climb_back_to_back_in_a_stream_nobody_answers_are_no_prefix(tmp_path):
    # GIVEN one GRPO group a message, pushed one way: prompt [P] and responses [4, R] whose
    # lengths climb by a fixed step within a step, fall, and climb again
    w, t = _shard(tmp_path), 0
    for s in range(5):
        w.step(t, s)
        for k in range(8):
            t += 1
            p, r = 30 + (11 * k + 5 * s) % 50, 60 + (23 * k + 7 * s) % 140
            w.hop(t, "rollout", "trainer", "group",
                  [tensor("prompt", (p,), "int32"), tensor("responses", (4, r), "int32")],
                  step=s, transport="zmq")
    # THEN no chain of them is a conversation: each runs back to back, nothing in flight
    assert _of(_view(tmp_path, w), "prefix_resend") == []


def test_the_same_bytes_to_every_rank_in_a_step_are_copies_and_chunks_alike_in_length_are_not():
    from flowmap.findings.duplicates import MIN_SAME_MESSAGE, same_messages
    from flowmap.read.events import Hop

    n = MIN_SAME_MESSAGE + 1000

    def sent(dst: str, key: str, step: int = 0, storages: tuple[int, ...] = ()) -> Hop:
        return Hop(1, 7, "controller", dst, "bytes", n, (), storages, step, None, "pickle", (),
                   n, key=key)

    # GIVEN one blob to 4 ranks in step 0; each rank's own chunk (same length, own bytes) in
    # step 1; the blob again in step 2 to one rank only; an object with storages, alike
    blob = [sent(f"rank{r}", "10000-aaaa") for r in range(4)]
    chunks = [sent(f"rank{r}", f"10000-{r:04x}", 1) for r in range(4)]
    alone = [sent("rank0", "10000-aaaa", 2)]
    objects = [sent(f"rank{r}", "10000-bbbb", 3, (5,)) for r in range(2)]
    groups = same_messages(blob + chunks + alone + objects, set())
    # THEN only the blob sent whole to every rank is a group of copies (storages are
    # followed by identity instead)
    assert groups == [blob]
    assert same_messages(blob, {id(h) for h in blob}) == []  # one message a PUB fanned out
