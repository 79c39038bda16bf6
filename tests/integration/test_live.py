"""`flowmap top` and `flowmap serve` watching real traced programs while they run.

GIVEN the built-in trainer running under `flowmap trace`, WHEN `top` runs in
tmux and `serve` is open in headless Chromium, THEN both show the run's
numbers growing while it runs, and once it ends the page and `/metrics`
equal `flowmap report --json`. The failure modes (a program killed, a shard
cut mid-line, the run removed, a port in use) each end in one sentence.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest
from browser.chromium import Browser, find_chromium
from flowmap_cli import run_cli
from prometheus_client.parser import text_string_to_metric_families

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLOWMAP = [sys.executable, "-m", "flowmap"]


def _wait(pred, timeout_s: float, what: str, every_s: float = 0.2):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(every_s)
    raise AssertionError(f"timed out waiting for {what}")


def _shards(run: str) -> list[str]:
    return [n for n in os.listdir(run) if n.endswith(".flowmap.jsonl")] if os.path.isdir(run) else []


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode("utf-8")


def _metrics(url: str) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(_get(url + "metrics")):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10).stdout


def _hops_on_screen(screen: str) -> int | None:
    m = re.search(r"([\d,]+) hops", screen)
    return int(m.group(1).replace(",", "")) if m else None


def _compare_while_growing(run: str, copy: str, points: int) -> None:
    """At `points` moments of a run being written, copy its bytes; the incremental reader
    that polled the growing copy reads it as `flowmap.load` reads the copy."""
    from growing import _doc

    from flowmap.model.run import Run, load
    from flowmap.read.incremental import IncrementalReader

    os.makedirs(copy)
    reader = IncrementalReader(copy, detail_hops=None)
    for _ in range(points):
        for name in _shards(run):
            shutil.copyfile(os.path.join(run, name), os.path.join(copy, name))
        reader.poll()
        assert _doc(reader.records(Run)) == _doc(load(copy, detail_hops=None))
        time.sleep(0.5)


def _screen_hops(session: str) -> list[int] | None:
    """[hops] as top's screen shows them (a list, so that 0 is an answer), or None."""
    n = _hops_on_screen(_tmux("capture-pane", "-p", "-t", session))
    return None if n is None else [n]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_top_and_serve_follow_a_running_trainer(tmp_path):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium on PATH")
    run = str(tmp_path / "run")
    trainer = subprocess.Popen(
        [*FLOWMAP, "trace", "-o", run, os.path.join(REPO, "examples", "grpo_tiny.py"),
         "--steps", "40"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    session = f"flowmap-top-{os.getpid()}"
    server = None
    try:
        _wait(lambda: _shards(run), 60, "the trainer's first shard")
        # top in a real terminal: tmux, 140 x 45, read back with capture-pane
        cmd = " ".join([*FLOWMAP, "top", run])
        subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "140", "-y", "45",
                        f"cd {tmp_path} && {cmd}"], check=True, timeout=10)
        server = subprocess.Popen([*FLOWMAP, "serve", run, "--port", "0"], cwd=tmp_path,
                                  stderr=subprocess.PIPE, text=True)
        line = server.stderr.readline()
        url = re.search(r"at (http://127\.0\.0\.1:\d+/)", line).group(1)
        with Browser(chromium) as b:
            page = b.new_page(1400, 900)
            page.goto(url)
            _wait(lambda: page.eval("document.body.getAttribute('data-ready')") == "1", 20, "page")
            first_page = page.eval("document.querySelector('#top .stats').textContent")
            first_top = _wait(lambda: _screen_hops(session), 20, "top's first screen")[0]
            assert "flowmap top" in _tmux("capture-pane", "-p", "-t", session)
            # while the trainer runs, both move
            _wait(lambda: (page.eval("document.querySelector('#top .stats').textContent")
                           != first_page), 30, "the page's numbers to move")
            _wait(lambda: (_hops_on_screen(_tmux("capture-pane", "-p", "-t", session)) or 0)
                  > first_top, 30, "top's hop count to move")
            assert trainer.poll() is None, "the trainer ended before the live views were checked"
            mid = _metrics(url)
            assert mid["flowmap_hops_total"][()] > 0
            _compare_while_growing(run, str(tmp_path / "copy"), points=3)
            # a key: sort by total
            _tmux("send-keys", "-t", session, "t")
            _wait(lambda: "sorted by total" in _tmux("capture-pane", "-p", "-t", session), 10,
                  "top to sort by total")
            assert trainer.wait(timeout=240) == 0, trainer.stderr.read().decode()[-2000:]
            # the end: top says so and keeps its screen; page and metrics equal the report
            _wait(lambda: "the program exited" in _tmux("capture-pane", "-p", "-t", session), 15,
                  "top to say the program exited")
            report = json.loads(run_cli(["report", run, "--json"], cwd=tmp_path).stdout)
            hops = sum(s["hops"] for s in report["seams"])
            _wait(lambda: f"{hops:,} hops" in _tmux("capture-pane", "-p", "-t", session)
                  or f"{hops} hops" in _tmux("capture-pane", "-p", "-t", session), 15,
                  "top's final hop count")
            _wait(lambda: page.eval("document.getElementById('live-status').textContent")
                  .startswith("the program exited"), 15, "the page to say the program exited")
            page_seams = page.eval("document.querySelectorAll('tr[data-seam]').length")
            # once the program has ended, the page is the report's, findings included
            _wait(lambda: [f["message"] for f in json.loads(_get(url + "data.json"))["findings"]]
                  == [f["message"] for f in report["findings"]][:50], 20, "the report's findings")
            doc = json.loads(_get(url + "data.json"))
            assert doc["run"]["hops"] == hops
            assert page.eval("document.querySelector('#top .stats').textContent").startswith(
                f"{hops} hops")
            assert {s["label"]: (s["hops"], s["total_bytes"]) for s in doc["seams"]} == {
                f"{s['src']} -> {s['dst']} : {s['name']}": (s["hops"], s["total_bytes"])
                for s in report["seams"]}
            assert page_seams == len(report["seams"])
            assert not page.errors(), page.errors()
            assert all(u.startswith(url) or u.startswith("data:") for u in page.requests())
            # q quits top: its command ends, and tmux closes the session with it
            _tmux("send-keys", "-t", session, "q")
            _wait(lambda: subprocess.run(["tmux", "has-session", "-t", session],
                                         capture_output=True).returncode != 0, 10, "top to quit")
        end = _metrics(url)
        by_seam = {(dict(k)["src"], dict(k)["dst"], dict(k)["name"]): v
                   for k, v in end["flowmap_seam_bytes_total"].items()}
        hops_by_seam = {(dict(k)["src"], dict(k)["dst"], dict(k)["name"]): v
                        for k, v in end["flowmap_seam_hops_total"].items()}
        assert by_seam == {(s["src"], s["dst"], s["name"]): s["total_bytes"] for s in report["seams"]}
        assert hops_by_seam == {(s["src"], s["dst"], s["name"]): s["hops"] for s in report["seams"]}
        assert end["flowmap_hops_total"][()] == hops
        assert end["flowmap_processes"][()] == len(_shards(run))
        owners = {dict(k)["owner"]: v for k, v in end["flowmap_owner_in_bytes_total"].items()}
        assert owners == {o["name"]: o["bytes_in"] for o in report["owners"]}
    finally:
        _tmux("kill-session", "-t", session)
        if server is not None:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=10)
        if trainer.poll() is None:
            trainer.kill()
            trainer.wait()


LOOP = textwrap.dedent("""
    import sys, time, flowmap
    with flowmap.tracing(sys.argv[1]):
        for i in range(10**9):
            flowmap.hop("a", "b", b"0123456789" * (1 + i % 7), name="x", step=i // 50)
            time.sleep(0.002)
""")


def test_a_program_killed_mid_run_is_cut_short(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    run = str(tmp_path / "run")
    proc = subprocess.Popen([sys.executable, str(script), run], cwd=tmp_path)
    try:
        _wait(lambda: _shards(run) and os.path.getsize(os.path.join(run, _shards(run)[0])) > 0,
              30, "the first shard")
        time.sleep(0.5)
        r = run_cli(["top", "--once", run, "--width", "120"], cwd=tmp_path)
        assert r.returncode == 0 and "running" in r.stdout, r.stdout + r.stderr
    finally:
        proc.kill()
        proc.wait()
    r = run_cli(["top", "--once", run, "--width", "120"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "the run was cut short: 1 of 1 processes never closed their shard" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr


def test_a_shard_cut_mid_line_reads_to_its_last_line(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    run = str(tmp_path / "run")
    proc = subprocess.Popen([sys.executable, str(script), run], cwd=tmp_path)
    try:
        _wait(lambda: _shards(run) and os.path.getsize(os.path.join(run, _shards(run)[0])) > 0,
              30, "the first shard")
        time.sleep(1.0)
    finally:
        proc.kill()
        proc.wait()
    path = os.path.join(run, _shards(run)[0])
    data = open(path, "rb").read().split(b"\0", 1)[0]
    cut = data.rfind(b"\n", 0, len(data) - 1) + 8  # eight bytes into the last line
    open(path, "wb").write(data[:cut])
    r = run_cli(["top", "--once", run, "--width", "120"], cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "the run was cut short" in r.stdout
    whole = json.loads(run_cli(["report", run, "--json"], cwd=tmp_path).stdout)
    assert _hops_on_screen(r.stdout) == sum(s["hops"] for s in whole["seams"]) == data[:cut - 8].count(
        b'["h"')  # the complete lines


def test_a_run_removed_while_watched_says_so(tmp_path):
    import runs

    src = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=2))
    proc = subprocess.Popen([*FLOWMAP, "top", src, "--width", "120"], cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    shutil.rmtree(src)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "was removed while watched" in out  # on the last screen, which stays
    assert err.strip() == f"flowmap: the run {src} was removed while watched"
    assert "Traceback" not in out + err


def test_serve_on_a_port_in_use_is_one_sentence(tmp_path):
    import runs

    src = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=1))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_cli(["serve", src, "--port", str(port)], cwd=tmp_path, timeout=30)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"flowmap: port {port} on 127.0.0.1 is in use; pick another with --port N")
    assert "Traceback" not in r.stderr


def test_serve_beyond_loopback_warns_first(tmp_path):
    # GIVEN the port taken on loopback, WHEN serve is asked to bind every address, THEN it
    # warns that the run's names would be exposed, and fails on the port: nothing listens
    import runs

    src = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=1))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_cli(["serve", src, "--port", str(port), "--bind", "0.0.0.0"], cwd=tmp_path,
                    timeout=30)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 2, r.stderr
    assert lines[0].startswith("flowmap: warning: serving on 0.0.0.0, beyond this machine")
    assert "names and shapes" in lines[0]
    assert lines[1] == f"flowmap: port {port} on 0.0.0.0 is in use; pick another with --port N"


def test_serve_keeps_the_last_data_of_a_run_removed_while_watched(tmp_path):
    import runs

    src = runs.write_rl_run(str(tmp_path / "run"), runs.RLRunSpec(steps=2))
    server = subprocess.Popen([*FLOWMAP, "serve", src, "--port", "0"], cwd=tmp_path,
                              stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"at (http://127\.0\.0\.1:\d+/)", server.stderr.readline()).group(1)
        before = json.loads(_get(url + "data.json"))
        shutil.rmtree(src)
        line = server.stderr.readline()  # the one sentence, once the next poll finds it gone
        assert line.strip() == f"flowmap: the run {src} was removed while watched"
        after = json.loads(_get(url + "data.json"))
        assert after["live"]["state"] == "gone"
        assert after["run"]["hops"] == before["run"]["hops"] > 0
        assert _metrics(url)["flowmap_hops_total"][()] == before["run"]["hops"]
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=10)
    assert "Traceback" not in err
