"""A live watch settles a queue-based run's old transport halves: bounded, the same figures.

GIVEN a run of many steps whose processes talk over transports (a queue read two
steps late, with one message of the same bytes every step; a queue nobody traced
reads; a queue an untraced process writes; a PUB socket whose second subscriber
gets its copy a step after the first; a channel folded by `--aggregate`), written
out piece by piece, WHEN a watch's reader (blocks of old steps, a small bound on
held halves) polls along, THEN at every point every per-seam, per-owner and run
figure equals what `flowmap.load` reads from the same bytes, AND the halves it
holds stay under the bound while the run's grow with every message.
"""

from __future__ import annotations

import os

import pytest
import runs
from growing import bins_add_up, exact_figures

import flowmap
from flowmap import trace_format as tf
from flowmap.model.run import Run
from flowmap.read.blocks import StepBlocks
from flowmap.read.events import ReceiveHalf, SendHalf
from flowmap.read.halves import UNTRACED
from flowmap.read.incremental import IncrementalReader
from flowmap.read.settle import HalfSettler
from flowmap.writer import encode_line, items_json
from flowmap.writer.tally import HopTally

STEPS = 120
LAG = 2  # the trainer takes a trajectory two steps after it was put
MAX_HALVES = 40
HORIZON = 8
DETAIL = 30


def _rows(s: int, i: int) -> int:
    return 2 + (s * 5 + i) % 13 + (30 if s % 29 == 3 else 0)


def _write(path: str) -> tuple[dict[str, list[bytes]], list[dict[str, int]]]:
    """The run's shards as lines, and each shard's line count at the end of each step."""
    rollout = runs.ShardWriter(os.path.join(path, f"h-1-1{tf.SHARD_SUFFIX}"), 1)
    trainer = runs.ShardWriter(os.path.join(path, f"h-2-1{tf.SHARD_SUFFIX}"), 2)
    critic = runs.ShardWriter(os.path.join(path, f"h-3-1{tf.SHARD_SUFFIX}"), 3)
    ws = [rollout, trainer, critic]
    put: dict[int, list[tuple[str, int]]] = {}
    ends: list[dict[str, int]] = []
    for s in range(STEPS):
        t = 1000 + s * 1000
        for w in ws:
            w.step(t, s)
        put[s] = []
        for i in range(3):
            leaf = runs.tensor("tokens", (_rows(s, i), 8), "int64")
            key = "same-bytes" if i == 2 else f"traj-{s}-{i}"  # i == 2: the same message
            nb = leaf[5]
            rollout.writer.send_half(t + 10 + i, "rollout", "queue:traj", "trajectory", [leaf],
                                     nb, "", s, None, "pickle", items_json([f"{s}-{i}"]),
                                     "mp:traj", key, nb + 40)
            put[s].append((key, nb + 40))
        for key, wire in put.get(s - LAG, []):
            trainer.writer.receive_half(t + 100, "trainer", "trajectory", "pickle", "mp:traj",
                                        key, wire)
        replay = runs.tensor("replay", (3 + s % 4, 8))  # taken back just inside the horizon
        rollout.writer.send_half(t + 15, "rollout", "queue:replay", "replay", [replay],
                                 replay[5], "", s, None, "pickle", "null", "mp:replay",
                                 f"r-{s}", replay[5] + 20)
        if s >= HORIZON - 1:
            back = runs.tensor("replay", (3 + (s - HORIZON + 1) % 4, 8))
            trainer.writer.receive_half(t + 25, "trainer", "replay", "pickle", "mp:replay",
                                        f"r-{s - HORIZON + 1}", back[5] + 20)
        log = runs.tensor("stats", (4 + s % 3,))
        rollout.writer.send_half(t + 20, "rollout", "queue:log", "stats", [log], log[5], "",
                                 None, None, "pickle", "null", "mp:log", f"log-{s}", log[5] + 30)
        trainer.writer.receive_half(t + 30, "trainer", "prompts", "pickle", "mp:ext", f"p-{s}",
                                    200 + s % 7)  # from a process nobody traced
        w_leaf = runs.tensor("weights", (16, 4 + s % 2))
        rollout.writer.send_half(t + 40, "rollout", "zmq", "weights", [w_leaf], w_leaf[5], "",
                                 s, s, "zmq", "null", "zmq:tcp://127.0.0.1:5555", f"w-{s}",
                                 w_leaf[5] + 16)
        trainer.writer.receive_half(t + 50, "trainer", "weights", "zmq",
                                    "zmq:tcp://127.0.0.1:5555", f"w-{s}", w_leaf[5] + 16)
        lost = runs.tensor("probe", (2, 2))  # put in a queue no traced process reads
        rollout.writer.send_half(t + 56, "rollout", "queue:lost", "probe", [lost], lost[5], "",
                                 s, None, "pickle", "null", "mp:lost", f"l-{s}", lost[5] + 9)
        fan = runs.tensor("fan", (5 + s % 3, 2))  # from a socket on two endpoints: `zmq` only
        rollout.writer.send_half(t + 57, "rollout", "zmq", "fanout", [fan], fan[5], "", s,
                                 None, "zmq", "null", "zmq", f"f-{s}", fan[5] + 16)
        trainer.writer.receive_half(t + 58, "trainer", "fanout", "zmq",
                                    "zmq:tcp://127.0.0.1:6000", f"f-{s}", fan[5] + 16)
        beat = runs.scalar("alive", "bool")  # the same bytes every step, taken at once
        rollout.writer.send_half(t + 52, "rollout", "queue:beat", "heartbeat", [beat], beat[5],
                                 "", s, None, "pickle", "null", "mp:beat", "beat", 12)
        trainer.writer.receive_half(t + 54, "trainer", "heartbeat", "pickle", "mp:beat", "beat",
                                    12)
        if s:  # the second subscriber gets its copy a step later
            prev = runs.tensor("weights", (16, 4 + (s - 1) % 2))
            critic.writer.receive_half(t + 60, "critic", "weights", "zmq",
                                       "zmq:tcp://127.0.0.1:5555", f"w-{s - 1}", prev[5] + 16)
        tally = HopTally(64 * (1 + s % 4), t + 70, 1, None, 64 * (1 + s % 4) + 8)  # two sends
        tally.add(96, t + 71, 1, None, 104)
        rollout.writer.send_fold("rollout", "queue:scores", "scores",
                                 [runs.tensor("r", (8,))], s, "pickle", "mp:scores", tally)
        trainer.writer.receive_fold(t + 80, "trainer", "scores", "pickle", "mp:scores", s, 2,
                                    64 * (1 + s % 4) + 8 + 104, t + 72)
        trainer.hop(t + 90, "trainer", "log", "metrics", [runs.scalar("loss")], step=s)
        ends.append({os.path.basename(w.path): len(w.lines) for w in ws})
    for w in ws:
        w.close(STEPS * 1000 + 2000)
    return {os.path.basename(w.path): [encode_line(x) for x in w.lines] for w in ws}, ends


def _write_to_step(dst, lines: dict[str, list[bytes]], ends: list[dict[str, int]], s: int) -> None:
    """The shards as written by the end of step `s` (the last: all of them, closed)."""
    last = s == STEPS - 1
    for name, ls in lines.items():
        upto = len(ls) if last else ends[s][name]
        (dst / name).write_bytes(b"".join(ls[:upto]) + (b"" if last else b"\0" * 4096))


def _held(reader: IncrementalReader) -> tuple[int, int]:
    """The full halves the reader holds, and the folded ones."""
    held = [h for t in reader.tails.values() if t.shard for h in t.shard.halves]
    full = sum(isinstance(h, (SendHalf, ReceiveHalf)) for h in held)
    return full, len(held) - full


@pytest.mark.parametrize("every", [1, 4])
def test_settled_halves_keep_every_figure_a_full_read_has(tmp_path, every):
    lines, ends = _write(str(tmp_path / "src"))
    dst = tmp_path / "live"
    dst.mkdir()
    settler = HalfSettler(MAX_HALVES, keep_hops=DETAIL)
    reader = IncrementalReader(str(dst), detail_hops=DETAIL, blocks=StepBlocks(HORIZON, 4),
                               settler=settler)
    held = []
    for s in range(every - 1, STEPS, every):
        _write_to_step(dst, lines, ends, s)
        reader.poll()
        live = reader.records(Run)
        full = flowmap.load(str(dst), detail_hops=DETAIL)
        assert exact_figures(live) == exact_figures(full), s
        bins_add_up(live, 9)
        held.append(_held(reader))
    # the run's seams, each from the halves that made it
    seams = set(full.seams)
    assert {("rollout", "trainer", "trajectory"), ("rollout", "queue:log", "stats"),
            (UNTRACED, "trainer", "prompts"), ("rollout", "trainer", "weights"),
            ("rollout", "trainer", "replay"), ("rollout", "trainer", "heartbeat"),
            ("rollout", "queue:lost", "probe"), ("rollout", "trainer", "fanout"),
            ("rollout", "critic", "weights"), ("rollout", "trainer", "scores")} <= seams
    # halves were settled many times over, and what is held stays under the bound, with
    # what one poll brings (13 halves a step) and the messages of the horizon's steps still
    # waiting to be received; the folded ones under the blocks' horizon once the blocks have
    # begun; while the run holds every one
    full_held = max(f for f, _ in held)
    folds_held = max(k for _, k in held[len(held) // 2:])
    assert settler.settled > 10 * MAX_HALVES
    assert full_held <= MAX_HALVES + 18 * every + HORIZON + 3 * (LAG + 1)
    assert folds_held <= 2 * (HORIZON + 1 + every)
    run_halves = sum(len(sh.halves) for sh in full.shards)
    assert run_halves > 20 * full_held
    # the sends nobody received (of no step) went to their fallback past half the bound
    assert full.seams[("rollout", "queue:log", "stats")].hops == STEPS
    assert live.seams[("rollout", "queue:log", "stats")].hops == STEPS


@pytest.mark.parametrize("every", [1, 4])
def test_frames_read_a_smaller_window_than_the_whole_view_of_settled_halves(tmp_path, every):
    # GIVEN a watch's reader: the larger window kept (settled hops too), frames read DETAIL
    lines, ends = _write(str(tmp_path / "src"))
    dst = tmp_path / "live"
    dst.mkdir()
    settler = HalfSettler(MAX_HALVES, keep_hops=10 * DETAIL, live_hops=DETAIL)
    reader = IncrementalReader(str(dst), detail_hops=10 * DETAIL, blocks=StepBlocks(HORIZON, 4),
                               settler=settler, live_hops=DETAIL)
    # and beside it, a reader of the smaller window alone (as a watch's was)
    small = IncrementalReader(str(dst), detail_hops=DETAIL, blocks=StepBlocks(HORIZON, 4),
                              settler=HalfSettler(MAX_HALVES, keep_hops=DETAIL))
    differ = 0
    for s in range(every - 1, STEPS, every):
        _write_to_step(dst, lines, ends, s)
        reader.poll()
        small.poll()
        # WHEN it snapshots: THEN a frame has the figures of a read in the smaller window and
        # keeps the hops that reader keeps, the whole view has those of one in the larger
        frame, whole = reader.records(Run), reader.records(Run, whole=True)
        assert len(frame.hops) == len(small.records(Run).hops), s
        assert exact_figures(frame) == exact_figures(flowmap.load(str(dst), detail_hops=DETAIL)), s
        assert exact_figures(whole) == exact_figures(
            flowmap.load(str(dst), detail_hops=10 * DETAIL)), s
        assert whole.num_hops == frame.num_hops
        differ += len(whole.hops) > len(frame.hops)
    assert settler.settled > 10 * MAX_HALVES and differ > 0  # the windows differ: it can fail


def test_a_receive_read_before_its_send_waits_for_it(tmp_path):
    # GIVEN the producer's shard read a step behind the others' (a moment earlier in each
    # poll): the trainer's receive of the heartbeat, the same bytes every step, comes
    # before its send, while the send of the same bytes a step before has settled
    lines, ends = _write(str(tmp_path / "src"))
    dst = tmp_path / "live"
    dst.mkdir()
    reader = IncrementalReader(str(dst), detail_hops=DETAIL, blocks=StepBlocks(HORIZON, 4),
                               settler=HalfSettler(MAX_HALVES, keep_hops=DETAIL))
    behind = min(lines)  # the producer's shard
    for s in range(STEPS + 1):
        for name, ls in lines.items():
            at = s - 1 if name == behind else s
            upto = len(ls) if at >= STEPS - 1 else ends[max(0, at)][name]
            (dst / name).write_bytes(b"".join(ls[:upto]) + b"\0" * 4096)
        reader.poll()
        reader.records(Run)
    # WHEN the run is read to its end, THEN each receive joined its own send, not a
    # copy of a message settled before: every figure is the finished reader's
    full = flowmap.load(str(dst), detail_hops=DETAIL)
    assert exact_figures(reader.records(Run)) == exact_figures(full)
    assert full.seams[("rollout", "trainer", "heartbeat")].hops == STEPS


def test_a_reader_without_blocks_settles_nothing(tmp_path):
    lines, _ = _write(str(tmp_path / "src"))
    dst = tmp_path / "live"
    dst.mkdir()
    for name, ls in lines.items():
        (dst / name).write_bytes(b"".join(ls))
    reader = IncrementalReader(str(dst), detail_hops=DETAIL)
    reader.poll()
    reader.records(Run)
    assert reader.settler is None
    held = [h for t in reader.tails.values() if t.shard for h in t.shard.halves]
    full = flowmap.load(str(dst), detail_hops=DETAIL)
    assert len(held) == sum(len(sh.halves) for sh in full.shards) == 20 * STEPS - 7 - (HORIZON - 1)


def test_a_bound_too_small_to_halve_is_refused():
    with pytest.raises(ValueError):
        HalfSettler(3)
