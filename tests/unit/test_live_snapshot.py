"""A watch's reader, fed as a run grows, snapshots what one read of the same bytes does.

GIVEN a run written out piece by piece (several processes, steps folded past a small
detail window, sizes and schemas that change, a seam that starts late, a process whose
shard holds only its header at first, a shard cut and written again from its start),
WHEN one reader polls along and snapshots a `Run` at each point, THEN its seams, page
data, step bins, flow and `/metrics` equal those of a new reader that reads the same
bytes at once: what the reader carries from poll to poll (offsets, partial lines, folded
cells, its memory of hop lines) changes nothing, and the snapshot carries no state of its
own from one point to the next.
"""

from __future__ import annotations

import os

import runs
from prometheus_client import generate_latest

from flowmap import trace_format as tf
from flowmap.live.metrics import registry
from flowmap.live.status import RUNNING, Status
from flowmap.live.watch import Frame
from flowmap.model.run import Run
from flowmap.read.blocks import StepBlocks
from flowmap.read.incremental import IncrementalReader
from flowmap.reporters.html_data import html_document
from flowmap.strict_json import dumps

STEPS = 24


def _write(path: str) -> dict[str, bytes]:
    """Three processes' shards: a steady seam, one whose size and schema change, one that
    starts at step 12, each step's hops spread over its time."""
    for p in range(3):
        w = runs.ShardWriter(os.path.join(path, f"h-{p + 1}-1{tf.SHARD_SUFFIX}"), p + 1)
        t = 1000 * p
        for s in range(STEPS):
            w.step(t, s)
            for i in range(6):
                t += 100
                w.hop(t, "rollout", "trainer", "batch", [runs.tensor("x", (8, 4))], step=s,
                      transport="ref" if i % 3 else "pickle")
                shape = (4 + s % 5 + i, 16) if s < 10 else (2, 2 + i)
                w.hop(t + 10, "trainer", "learner", "grads",
                      [runs.tensor("g", shape)] + ([runs.scalar("loss")] if s >= 15 else []),
                      step=s, items=[f"{p}-{s}-{i}"])
                if s >= 12:
                    w.hop(t + 20, "learner", "ref", "weights", [runs.tensor("w", (s, 3))],
                          step=s, transport="shm")
        w.close(t + 1000)
    out = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read()
    return out


def _figures(run: Run) -> tuple[object, ...]:
    frame = Frame(run, Status(RUNNING, ""), {}, (), 0.0)
    page = dumps(html_document(run.view, "auto", found=()), sort_keys=True)
    bins = [run.view.step_bins(n) for n in (1, 5, 7)]  # bins of several steps each
    return run.seams, page, generate_latest(registry(lambda: frame)), bins, run.view.flow


def _snapshot(path: str, reader: IncrementalReader | None = None) -> Run:
    if reader is None:  # a new one, that reads every byte at once
        reader = IncrementalReader(path, detail_hops=30, blocks=StepBlocks())
        reader.poll()
    return reader.records(Run)


def test_snapshots_of_a_growing_run_equal_one_read_of_the_same_bytes(tmp_path):
    data = _write(str(tmp_path / "src"))
    dst = tmp_path / "live"
    dst.mkdir()
    reader = IncrementalReader(str(dst), detail_hops=30, blocks=StepBlocks())
    names = list(data)
    lines = {n: data[n].split(b"\n") for n in names}
    points = 40
    compared = folded = 0
    for k in range(1, points + 1):
        for j, name in enumerate(names):
            upto = len(lines[name]) * k // points
            if j == 2 and k <= points // 3:
                upto = 1  # a later process: its header only
            if name == names[0] and k == points // 2:
                upto //= 3  # cut and written again from its start: the tail starts over
            with open(dst / name, "wb") as f:
                f.write(b"\n".join(lines[name][:upto]) + (b"\n" if upto else b"")
                        + (b"\0" * 4096 if k < points else b""))
        reader.poll()
        run = _snapshot(str(dst), reader)
        assert _figures(run) == _figures(_snapshot(str(dst))), k
        assert not hasattr(run.view, "step_memo") and not hasattr(run, "seam_memo")
        compared += 1
        folded += bool(run.seam_steps) and bool(run.hops)
    assert compared == points
    assert folded > points // 2  # kept hops and folded steps both: the window was passed


def test_a_watchs_frames_read_a_smaller_window_and_its_end_the_larger_one(tmp_path):
    # GIVEN a reader as a watch holds it: the larger window (the report's) kept, frames read
    # a smaller one (`live_hops`), old steps in blocks
    data = _write(str(tmp_path / "src"))
    dst = tmp_path / "live"
    dst.mkdir()
    reader = IncrementalReader(str(dst), detail_hops=200, blocks=StepBlocks(4, 4), live_hops=30)

    def at_once(detail: int) -> Run:
        once = IncrementalReader(str(dst), detail_hops=detail, blocks=StepBlocks(4, 4))
        once.poll()
        return once.records(Run)

    names = list(data)
    lines = {n: data[n].split(b"\n") for n in names}
    points, differ = 20, 0
    for k in range(1, points + 1):
        for name in names:
            upto = len(lines[name]) * k // points
            with open(dst / name, "wb") as f:
                f.write(b"\n".join(lines[name][:upto]) + (b"\n" if upto else b""))
        reader.poll()
        # WHEN it snapshots as the run grows: THEN a frame is what a reader of the smaller
        # window reads of the same bytes, and the whole view what one of the larger reads
        frame, whole = reader.records(Run), reader.records(Run, whole=True)
        assert _figures(frame) == _figures(at_once(30)), k
        assert _figures(whole) == _figures(at_once(200)), k
        differ += _figures(frame) != _figures(whole)
    assert differ > points // 2  # the two windows differ: the test can fail
