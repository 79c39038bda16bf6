"""The live watch under faults: a removed run made anew, a killed main process, a run's end.

Each test drives the real watch on shards written as a tracer writes them, with real
processes where a process's life is the point.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import runs
from rich.console import Console

import flowmap
from flowmap.findings import findings
from flowmap.live.status import CUT_SHORT, EXITED, RUNNING
from flowmap.live.watch import Watch
from flowmap.model.run import Run


def _shard(path: str, pid: int, ppid: int, hops: int, *, t0_wall_ns: int, clean: bool) -> None:
    w = runs.ShardWriter(path, pid)
    for i in range(hops):
        w.hop(10 * (i + 1), "a", "b", "x", [runs.tensor("t", (4,))], step=i)
    w.close(10 * (hops + 1), clean=clean)
    text = open(path).read().replace('"host":"testhost"', f'"host":"{socket.gethostname()}"')
    text = text.replace('"ppid":1,', f'"ppid":{ppid},').replace(
        '"t0_wall_ns":1700000000000000000', f'"t0_wall_ns":{t0_wall_ns}')
    with open(path, "w") as f:
        f.write(text)


def test_a_run_removed_and_made_anew_is_watched_anew(tmp_path):
    # GIVEN a watch over a run of 3 hops
    run = str(tmp_path / "run")
    _shard(os.path.join(run, "h-1-1.flowmap.jsonl"), 1, 0, 3, t0_wall_ns=1, clean=True)
    watch = Watch(run)
    assert watch.update().run.num_hops == 3
    # WHEN the directory is removed: THEN the watch says so
    shutil.rmtree(run)
    assert watch.update().gone
    # AND WHEN a tracer makes it anew with 5 hops: THEN the watch follows the new run
    _shard(os.path.join(run, "h-2-2.flowmap.jsonl"), 2, 0, 5, t0_wall_ns=1, clean=True)
    frame = watch.update()
    assert not frame.gone and frame.run.num_hops == 5


def test_a_run_made_anew_between_two_polls_is_not_mixed_with_the_old_one(tmp_path):
    run = str(tmp_path / "run")
    _shard(os.path.join(run, "h-1-1.flowmap.jsonl"), 1, 0, 3, t0_wall_ns=1, clean=True)
    watch = Watch(run)
    assert watch.update().run.num_hops == 3
    # removed and made anew before the watch polls again: it never saw the gap
    shutil.rmtree(run)
    _shard(os.path.join(run, "h-2-2.flowmap.jsonl"), 2, 0, 5, t0_wall_ns=1, clean=True)
    frame = watch.update()
    for _ in range(2):
        if not frame.gone and frame.run.num_hops == 5:
            break
        frame = watch.update()
    assert not frame.gone
    assert [s.pid for s in frame.run.shards] == [2] and frame.run.num_hops == 5


def test_a_killed_main_process_is_cut_short_while_its_child_runs(tmp_path):
    # GIVEN a run of a main process and its child, both real processes, both shards open
    main = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run = str(tmp_path / "run")
        _shard(os.path.join(run, f"h-{main.pid}-1.flowmap.jsonl"), main.pid, os.getpid(), 3,
               t0_wall_ns=1_000, clean=False)
        _shard(os.path.join(run, f"h-{child.pid}-1.flowmap.jsonl"), child.pid, main.pid, 3,
               t0_wall_ns=2_000, clean=False)
        watch = Watch(run)
        assert watch.update().status.state == RUNNING
        # WHEN the main process is killed (SIGKILL: it cannot close its shard)
        main.send_signal(signal.SIGKILL)
        main.wait()
        # THEN within 5 s (the next update) the watch says the run was cut short
        t = time.monotonic()
        frame = watch.update()
        while frame.status.state == RUNNING and time.monotonic() - t < 5:
            time.sleep(0.2)
            frame = watch.update()
        assert frame.status.state == CUT_SHORT, frame.status.sentence
        assert f"main process {main.pid}" in frame.status.sentence
        assert "1 of its 1 other processes still run" in frame.status.sentence
        assert child.poll() is None
    finally:
        for p in (main, child):
            if p.poll() is None:
                p.kill()
                p.wait()


def _ended_run(tmp_path, steps: int = 3) -> str:
    path = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=steps))
    with open(os.path.join(path, "run.json"), "w") as f:
        json.dump({"flowmap": "run", "schema": 1, "exit_code": 0}, f)
    return path


def _figures(run: Run) -> tuple[object, ...]:
    return (run.num_hops, {k: (s.hops, s.total_bytes, s.bytes_per_step_max, s.p50_bytes,
                               s.max_bytes) for k, s in run.seams.items()},
            {n: (o.bytes_in, o.bytes_out) for n, o in run.owners.items()},
            [f.message for f in findings(run.view)])


def test_a_piped_top_ends_with_the_program_with_the_reports_figures(tmp_path, monkeypatch):
    # GIVEN a run whose program has ended, and `top` without a terminal
    from flowmap.live.top import top

    monkeypatch.setattr(sys, "stdin", io.StringIO())
    # WHEN it runs; THEN it ends with the program, its last frame the report's: every seam's
    # figures, every owner's bytes, the findings
    frame = top(_ended_run(tmp_path), Console(file=io.StringIO(), width=120))
    report = flowmap.load(str(tmp_path / "run"))
    assert frame.status.state == EXITED and report.num_hops > 0
    assert _figures(frame.run) == _figures(report)
    assert [f.message for f in frame.findings] == [f.message for f in findings(report.view)]


def test_the_end_is_a_snapshot_in_the_reports_window_not_a_second_read(tmp_path):
    # GIVEN an ended run longer than a frame's window (500 hops a process) and its horizon
    # (64 steps): frames fold much of it, `flowmap report` keeps it all one by one
    path = _ended_run(tmp_path, steps=150)
    report = flowmap.load(path)
    watch = Watch(path)
    # WHEN the watch sees the program ended, with its last bytes read
    frame = watch.update()
    # THEN its frames while the run went read the smaller window ...
    frames = watch.reader.records(Run)
    assert frames.view.detail.folded and not report.view.detail.folded
    assert _figures(frames) != _figures(report)  # the window shows: the test can fail
    # ... and the last frame is the report's run, findings included, found at once (no wait
    # of FINDINGS_EVERY_S)
    assert frame.status.state == EXITED
    assert _figures(frame.run) == _figures(report)
    assert [f.message for f in frame.findings] == [f.message for f in findings(report.view)]
    # ... and every byte of the run was read once: the end is a snapshot, not a re-read
    size = sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
               if n.endswith(".flowmap.jsonl"))
    assert watch.reader.bytes_read == size
    # AND a later update, with nothing more come, keeps that frame
    assert watch.update() is frame
