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
import threading
import time

import runs
from rich.console import Console

import flowmap
from flowmap.findings import findings
from flowmap.live.status import CUT_SHORT, EXITED, RUNNING
from flowmap.live.watch import Watch


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
        watch = Watch(run, final_read=False)
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


def _ended_run(tmp_path) -> str:
    path = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=3))
    with open(os.path.join(path, "run.json"), "w") as f:
        json.dump({"flowmap": "run", "schema": 1, "exit_code": 0}, f)
    return path


def test_a_piped_top_ends_with_the_program_without_reading_the_run_again(tmp_path, monkeypatch):
    # GIVEN a run whose program has ended, and `top` without a terminal
    import flowmap.live.watch as watch_module
    from flowmap.live.top import top

    reads = []
    real = watch_module.load
    monkeypatch.setattr(watch_module, "load", lambda *a, **k: reads.append(a) or real(*a, **k))
    monkeypatch.setattr(sys, "stdin", io.StringIO())
    # WHEN it runs; THEN it ends with the live frame (exact sums), not after a second,
    # whole read of the run (13-14 s on a 72 MB run)
    frame = top(_ended_run(tmp_path), Console(file=io.StringIO(), width=120))
    assert frame.status.state == EXITED and reads == []
    # AND its figures are the report's: every seam's hops and bytes, every owner's bytes
    report = flowmap.load(str(tmp_path / "run"))
    assert frame.run.num_hops == report.num_hops and report.num_hops > 0
    assert {k: (s.hops, s.total_bytes) for k, s in frame.run.seams.items()} == {
        k: (s.hops, s.total_bytes) for k, s in report.seams.items()}
    assert {n: (o.bytes_in, o.bytes_out) for n, o in frame.run.owners.items()} == {
        n: (o.bytes_in, o.bytes_out) for n, o in report.owners.items()}


def test_a_viewer_that_stays_gets_the_reports_read_from_a_thread(tmp_path, monkeypatch):
    # GIVEN a watch that stays after the end (an interactive top, serve)
    import flowmap.live.watch as watch_module

    threads = []
    real = watch_module.load
    monkeypatch.setattr(watch_module, "load", lambda *a, **k: threads.append(
        threading.current_thread()) or real(*a, **k))
    path = _ended_run(tmp_path)
    watch = Watch(path)
    frame = watch.update()
    # WHEN the program has ended: THEN the run is read as `report` reads it, off the
    # viewer's thread (its keys and requests are answered meanwhile), and becomes the frame
    deadline = time.monotonic() + 30
    while frame.findings != tuple(findings(flowmap.load(path).view)) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
        frame = watch.update()
    assert threads and all(t is not threading.current_thread() for t in threads)
    assert frame.status.state == EXITED
    assert [f.message for f in frame.findings] == [
        f.message for f in findings(flowmap.load(path).view)]
