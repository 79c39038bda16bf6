"""The incremental reader reads a growing run exactly as the finished reader reads the same bytes.

GIVEN a finished run, WHEN its shards are written out again piece by piece
(cut anywhere, mid-line too, with a mapped shard's zero tail after the cut,
and one shard appearing only later), THEN at every point the reader that
polled along gives the same report document as `flowmap.load` of the bytes
on disk at that moment.
"""

from __future__ import annotations

import json
import os

import pytest
import runs
from growing import _doc, _grow, _shards

import flowmap
from flowmap import trace_format as tf
from flowmap.model.run import Run
from flowmap.read.bounds import MAX_RECORDS
from flowmap.read.incremental import IncrementalReader, RunGone
from flowmap.read.tail import MAX_READ


@pytest.mark.parametrize("detail_hops", [None, 40])
def test_growing_rl_run_reads_as_the_finished_reader_reads_it(tmp_path, detail_hops):
    src = runs.write_rl_run(str(tmp_path / "src"), runs.RLRunSpec(steps=6))
    assert _grow(src, str(tmp_path / "live"), 12, 1, detail_hops) >= 8


def test_growing_run_polled_byte_by_byte_at_its_line_ends(tmp_path):
    src = runs.write_rl_run(str(tmp_path / "src"), runs.RLRunSpec(steps=2))
    assert _grow(src, str(tmp_path / "live"), 40, 7, None) >= 20


def test_reader_reads_only_what_was_appended(tmp_path):
    src = runs.write_rl_run(str(tmp_path / "src"), runs.RLRunSpec(steps=3))
    dst = tmp_path / "live"
    dst.mkdir()
    name, data = next(iter(_shards(src).items()))
    reader = IncrementalReader(str(dst))
    half = data.rfind(b"\n", 0, len(data) // 2) + 1
    (dst / name).write_bytes(data[:half] + b"\0" * 100)
    assert reader.poll() == half
    assert reader.poll() == 0  # nothing new
    (dst / name).write_bytes(data)
    assert reader.poll() == len(data) - half


def test_a_line_still_being_written_waits_for_its_newline(tmp_path):
    w = runs.ShardWriter(str(tmp_path / "run" / "h-1-1.flowmap.jsonl"), 1)
    w.hop(10, "a", "b", "x", [runs.tensor("t", (4,))])
    w.hop(20, "a", "b", "x", [runs.tensor("t", (4,))])
    w.close(30)
    data = (tmp_path / "run" / "h-1-1.flowmap.jsonl").read_bytes()
    path = tmp_path / "run" / "h-1-1.flowmap.jsonl"
    cut = data.rfind(b'["h"') + 5  # inside the second hop
    path.write_bytes(data[:cut])
    reader = IncrementalReader(str(tmp_path / "run"))
    reader.poll()
    assert reader.records(Run).num_hops == 1
    path.write_bytes(data)
    reader.poll()
    run = reader.records(Run)
    assert run.num_hops == 2 and not run.truncated and run.health.bad_lines == 0


def test_a_long_reserved_tail_is_not_more_to_read(tmp_path):
    # GIVEN a mapped shard of a long run: its lines, then a reserved, unwritten tail of zeros
    # larger than one poll reads (the writer reserves up to 32 MB at a time)
    w = runs.ShardWriter(str(tmp_path / "run" / "h-1-1.flowmap.jsonl"), 1)
    w.hop(10, "a", "b", "x", [runs.tensor("t", (4,))])
    w.hop(20, "a", "b", "x", [runs.tensor("t", (4,))])
    w.close(30)
    path = tmp_path / "run" / "h-1-1.flowmap.jsonl"
    data = path.read_bytes()
    data = data[:data.rfind(b'["end"')]  # still being written
    path.write_bytes(data + b"\0" * (2 * MAX_READ))
    reader = IncrementalReader(str(tmp_path / "run"))
    # WHEN polled; THEN it reads the lines, and says nothing more waits (a watch that
    # believed it would read again and again, "catching up", for its whole time budget)
    assert reader.poll() == len(data)
    assert not reader.more
    assert reader.records(Run).num_hops == 2
    # AND a tail past MAX_READ of lines is more to read, taken at the next poll
    line = data[data.rfind(b'["h"'):]
    lines = line * (MAX_READ // len(line) + 10)
    path.write_bytes(data + lines + b"\0" * 100)
    assert reader.poll() <= MAX_READ and reader.more
    reader.poll()
    assert not reader.more and reader.records(Run).num_hops == 2 + lines.count(b"\n")


def test_counter_samples_are_folded_past_the_bound_with_exact_statistics(tmp_path):
    w = runs.ShardWriter(str(tmp_path / "run" / "h-1-1.flowmap.jsonl"), 1)
    values = [float((i * 37) % 101) for i in range(3 * MAX_RECORDS)]
    for i, v in enumerate(values):
        w.counter(i, "depth", v, "buf")
    w.close(len(values))
    reader = IncrementalReader(str(tmp_path / "run"))
    reader.poll()
    shard = reader.tails[str(tmp_path / "run" / "h-1-1.flowmap.jsonl")].shard
    assert shard is not None and len(shard.counters) <= MAX_RECORDS
    live, whole = reader.records(Run).counters["depth"], flowmap.load(str(tmp_path / "run")).counters["depth"]
    assert (live.count, live.min, live.max, live.last) == (whole.count, whole.min, whole.max, whole.last)
    assert live.mean == pytest.approx(whole.mean)


def test_removed_run_says_so(tmp_path):
    src = runs.write_rl_run(str(tmp_path / "src"), runs.RLRunSpec(steps=1))
    reader = IncrementalReader(src)
    reader.poll()
    for name in os.listdir(src):
        os.remove(os.path.join(src, name))
    os.rmdir(src)
    with pytest.raises(RunGone, match="was removed while watched"):
        reader.poll()


def test_not_a_trace_among_shards_is_one_problem(tmp_path):
    src = runs.write_rl_run(str(tmp_path / "src"), runs.RLRunSpec(steps=1))
    with open(os.path.join(src, "zz-1-1" + tf.SHARD_SUFFIX), "w") as f:
        f.write(json.dumps({"not": "a trace"}) + "\n")
    reader = IncrementalReader(src)
    reader.poll()
    assert any("is not a flowmap trace" in p for p in reader.records(Run).problems)


def test_repeated_hop_lines_read_as_the_finished_reader_reads_them(tmp_path):
    # GIVEN a shard of hop lines equal but for their time, among them times the format
    # refuses (a leading zero is not JSON, one past the bound) and one it takes (negative)
    w = runs.ShardWriter(str(tmp_path / "src" / "h-1-1.flowmap.jsonl"), 1)
    for i in range(50):
        w.hop(10 * i, "a", "b", "x", [runs.tensor("t", (4,))], step=i // 10)
    good = w.lines[-1]
    w.lines += [good.replace('["h",490,', '["h",0491,'), good.replace('["h",490,', '["h",' + "9" * 16 + ","),
                good.replace('["h",490,', '["h",-5,'), good.replace('["h",490,', '["h", 492,'),
                good.replace('["h",490,', '["h",493,') + " "]
    w.close(1000)
    data = (tmp_path / "src" / "h-1-1.flowmap.jsonl").read_bytes()
    (tmp_path / "live").mkdir()
    path = tmp_path / "live" / "h-1-1.flowmap.jsonl"
    reader = IncrementalReader(str(tmp_path / "live"), detail_hops=None)
    # WHEN it is read in two pieces; THEN as `load` reads it, bad lines counted alike
    for cut in (len(data) // 3, len(data)):
        path.write_bytes(data[:cut])
        reader.poll()
        live, whole = reader.records(Run), flowmap.load(str(tmp_path / "live"), detail_hops=None)
        assert _doc(live) == _doc(whole)
        assert live.health.bad_lines == whole.health.bad_lines
    assert whole.health.bad_lines == 2 and whole.num_hops == 53


def test_runs_of_equal_hop_lines_fold_as_one_by_one(tmp_path):
    # GIVEN steady hop lines past a small detail window, in runs of equal lines (two seams
    # interleaved in blocks, versions and sizes varying by block), WHEN read as it grows,
    # THEN every point reads as `load` reads it
    w = runs.ShardWriter(str(tmp_path / "src" / "h-1-1.flowmap.jsonl"), 1)
    t = 0
    for step in range(12):
        w.step(t, step)
        for block in range(6):
            for _ in range(7):
                t += 3
                w.hop(t, "rollout/0", "buffer" if block % 2 else "driver", "traj",
                      [runs.tensor("x", (4 + block % 3,))], step=step, version=step - block % 2,
                      items=[block] if block == 5 else None)
    w.close(t + 1)
    with open(tmp_path / "src" / "run.json", "w") as f:
        f.write("{}")
    assert _grow(str(tmp_path / "src"), str(tmp_path / "live"), 9, 5, 30) >= 6
    assert _grow(str(tmp_path / "src"), str(tmp_path / "live2"), 9, 6, None) >= 6


def test_lines_remembered_past_the_bound_are_learned_again_while_they_pay(tmp_path, monkeypatch):
    import flowmap.read.hop_lines as hop_lines

    monkeypatch.setattr(hop_lines, "SEEN_GENERATION", 16)
    # GIVEN two shards past the bound on remembered lines: one of steady steps (each line
    # repeated, a long run's), one whose every hop names its own item
    steady = runs.ShardWriter(str(tmp_path / "src" / "h-1-1.flowmap.jsonl"), 1)
    distinct = runs.ShardWriter(str(tmp_path / "src" / "h-2-1.flowmap.jsonl"), 2)
    for step in range(60):
        steady.step(100 * step, step)
        distinct.step(100 * step, step)
        for k in range(5):
            steady.hop(100 * step + k + 1, "a", "b", "x", [runs.tensor("t", (4,))], step=step)
            distinct.hop(100 * step + k + 1, "a", "b", "x", [runs.tensor("t", (4,))], step=step,
                         items=[step * 5 + k])
    steady.close(10_000)
    distinct.close(10_000)
    with open(tmp_path / "src" / "run.json", "w") as f:
        f.write("{}")
    # WHEN read as it grows; THEN every point reads as `load` reads it
    assert _grow(str(tmp_path / "src"), str(tmp_path / "live"), 7, 3, None) >= 5
    reader = IncrementalReader(str(tmp_path / "src"), detail_hops=None)
    reader.poll()
    assert _doc(reader.records(Run)) == _doc(flowmap.load(str(tmp_path / "src"), detail_hops=None))
    # AND the steady shard still takes its lines from what it learned; the other stopped
    by_pid = {t.shard.pid: t.feed.lines for t in reader.tails.values() if t.feed is not None}
    assert by_pid[1].learning and 0 < len(by_pid[1].seen) <= 16 and len(by_pid[1].old) <= 16
    assert not by_pid[2].learning


def test_lines_of_a_working_set_over_one_generation_stay_remembered(tmp_path, monkeypatch):
    import flowmap.read.hop_lines as hop_lines

    monkeypatch.setattr(hop_lines, "SEEN_GENERATION", 8)
    # GIVEN a shard whose 9 distinct hop lines (more than fill a generation) come back in
    # turn, again and again, with a time of their own each
    w = runs.ShardWriter(str(tmp_path / "src" / "h-1-1.flowmap.jsonl"), 1)
    t = 0
    for _round in range(40):
        for k in range(9):
            t += 1
            w.hop(t, "a", "b", f"x{k}", [runs.tensor("t", (4,))], step=0)
    w.close(t + 1)
    with open(tmp_path / "src" / "run.json", "w") as f:
        f.write("{}")
    # WHEN read as it grows
    assert _grow(str(tmp_path / "src"), str(tmp_path / "live"), 9, 4, None) >= 5
    reader = IncrementalReader(str(tmp_path / "src"), detail_hops=None)
    learned = []
    real_learn = hop_lines.HopLines._learn

    def counting(self, raw, comma):
        learned.append(raw[comma:])
        return real_learn(self, raw, comma)

    monkeypatch.setattr(hop_lines.HopLines, "_learn", counting)
    reader.poll()
    # THEN each line was checked at most once: later ones came from the remembered generations
    assert learned and len(learned) == len(set(learned))
    (only,) = (t.feed.lines for t in reader.tails.values())
    assert only.learning and len(only.seen) <= 8 and len(only.old) <= 8
    assert _doc(reader.records(Run)) == _doc(flowmap.load(str(tmp_path / "src"), detail_hops=None))


def test_what_a_shard_remembers_stays_bounded_in_a_run_of_ever_new_steps(tmp_path, monkeypatch):
    import flowmap.read.hop_lines as hop_lines

    monkeypatch.setattr(hop_lines, "SEEN_GENERATION", 8)
    # GIVEN a long run whose lines differ step to step (the step is in the line)
    w = runs.ShardWriter(str(tmp_path / "src" / "h-1-1.flowmap.jsonl"), 1)
    for step in range(200):
        w.step(100 * step, step)
        for k in range(5):
            w.hop(100 * step + k + 1, "a", "b", "x", [runs.tensor("t", (4,))], step=step)
    w.close(100_000)
    with open(tmp_path / "src" / "run.json", "w") as f:
        f.write("{}")
    # WHEN it is read; THEN it holds two generations at most, and still learns (lines repeat
    # within a step)
    reader = IncrementalReader(str(tmp_path / "src"), detail_hops=None)
    reader.poll()
    (only,) = (t.feed.lines for t in reader.tails.values())
    assert only.learning and len(only.seen) + len(only.old) <= 16
    assert _doc(reader.records(Run)) == _doc(flowmap.load(str(tmp_path / "src"), detail_hops=None))


def test_hop_lines_whose_items_look_like_hop_lines_read_as_the_finished_reader_reads_them(tmp_path):
    # GIVEN runs of equal hop lines whose item ids hold the bytes a hop line starts with
    w = runs.ShardWriter(str(tmp_path / "src" / "h-1-1.flowmap.jsonl"), 1)
    for step in range(4):
        w.step(100 * step, step)
        for k in range(6):
            w.hop(100 * step + k + 1, "a", "b", "x", [runs.tensor("t", (4,))], step=step,
                  items=[["h", 7 + k % 2], "h"])
    w.close(1000)
    with open(tmp_path / "src" / "run.json", "w") as f:
        f.write("{}")
    # WHEN read as it grows; THEN every point reads as `load` reads it
    assert _grow(str(tmp_path / "src"), str(tmp_path / "live"), 6, 2, 3) >= 4
    assert _grow(str(tmp_path / "src"), str(tmp_path / "live2"), 6, 4, None) >= 4


@pytest.mark.parametrize("mib", [5, 9])
def test_a_garbage_line_longer_than_one_read_never_stalls_the_reader(tmp_path, mib):
    # GIVEN a shard with a garbage line of 5 MiB (longer than one poll reads) or 9 MiB (past
    # the bound on a line) between two hops: corruption, or another writer
    w = runs.ShardWriter(str(tmp_path / "run" / "h-1-1.flowmap.jsonl"), 1)
    w.hop(10, "a", "b", "x", [runs.tensor("t", (4,))])
    w.hop(20, "a", "b", "x", [runs.tensor("t", (4,))])
    w.close(30)
    path = tmp_path / "run" / "h-1-1.flowmap.jsonl"
    data = path.read_bytes()
    cut = data.rfind(b'["h"')
    garbage = bytes(range(11, 256)) * (mib * 2**20 // 245)
    assert len(garbage) > MAX_READ
    path.write_bytes(data[:cut] + garbage + b"\n" + data[cut:])
    # WHEN a watch polls while more waits; THEN it reads past the line within a few polls
    reader = IncrementalReader(str(tmp_path / "run"))
    polls = 1
    reader.poll()
    while reader.more:
        assert polls < 8, "the reader stalls on the long line"
        reader.poll()
        polls += 1
    # AND reads the run as the finished reader does: both hops, one bad line, closed
    live, whole = reader.records(Run), flowmap.load(str(tmp_path / "run"))
    assert (live.num_hops, live.health.bad_lines, live.truncated) == (2, 1, False)
    assert (whole.num_hops, whole.health.bad_lines) == (2, 1)


def test_a_watch_numbers_and_names_processes_as_the_finished_reader_does(tmp_path):
    # GIVEN two containers' processes, both pid 1 on hosts of one hostname, in one run
    run = tmp_path / "run"
    run.mkdir()
    for i, ns in enumerate((10, 11)):
        path = str(run / f"h-1-{i}{tf.SHARD_SUFFIX}")
        w = runs.ShardWriter(path, 1)
        w.hop(5, f"worker/{i}", "learner", "batch", [runs.tensor("x", (4,))], step=0)
        w.close(9)
        lines = open(path).read().splitlines(keepends=True)
        header = json.loads(lines[0])
        header.update(boot_id="b", pid_ns=ns, start_ticks=5, t0_wall_ns=header["t0_wall_ns"] + i)
        with open(path, "w") as f:
            f.writelines([json.dumps(header) + "\n", *lines[1:]])
    # WHEN a watch polls it and `flowmap.load` reads it
    reader = IncrementalReader(str(run))
    reader.poll()
    live, done = reader.records(Run), flowmap.load(str(run))
    # THEN both number the processes apart and name the hosts apart, alike
    names = [(s.pid, s.os_pid, s.host_label) for s in live.shards]
    assert names == [(s.pid, s.os_pid, s.host_label) for s in done.shards]
    assert len({p for p, _, _ in names}) == 2 and {h for _, _, h in names} == {
        "testhost#1", "testhost#2"}
