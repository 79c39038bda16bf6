"""`flowmap trace` and `flowmap report` driven as a user would, in subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import flowmap

MiB = 1024 * 1024

FIVE_MIB_SCRIPT = """
import flowmap, torch
big = torch.zeros(1024 * 1024)          # 4 MiB float32
small = torch.zeros(256 * 1024)         # 1 MiB float32
for i in range(100):
    flowmap.hop("A", "B", {"big": big, "small": small, "view": big[:1000]}, name="batch")
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def report_json(run_cli, run_dir) -> dict:
    r = run_cli(["report", str(run_dir), "--json"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_hundred_hops_of_exactly_five_mib(tmp_path, run_cli):
    script = write(tmp_path, "five.py", FIVE_MIB_SCRIPT)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (seam,) = report_json(run_cli, tmp_path / "run")["seams"]
    assert (seam["src"], seam["dst"], seam["name"], seam["hops"]) == ("A", "B", "batch", 100)
    assert seam["total_bytes"] == 100 * 5 * MiB
    assert seam["max_bytes"] == seam["p50_bytes"] == 5 * MiB
    assert {leaf["path"] for leaf in seam["leaves"]} == {"big", "small", "view"}


def test_the_program_runs_as_under_python(tmp_path, run_cli):
    script = write(tmp_path, "prog.py", """
        import sys
        print("name", __name__)
        print("argv", sys.argv)
        print("path0", sys.path[0])
        print("err", file=sys.stderr)
        sys.exit(7)
    """)
    plain = subprocess.run([sys.executable, str(script), "--flag", "x", "-o", "y"],
                           capture_output=True, text=True, cwd=tmp_path)
    traced = run_cli(["trace", "-o", str(tmp_path / "run"), str(script), "--flag", "x", "-o", "y"],
                     cwd=tmp_path)
    assert plain.returncode == traced.returncode == 7
    assert traced.stdout == plain.stdout
    assert "name __main__" in traced.stdout
    assert f"path0 {tmp_path}" in traced.stdout
    assert "argv ['" in traced.stdout and "'--flag', 'x', '-o', 'y']" in traced.stdout
    assert traced.stderr.startswith(plain.stderr)
    assert "flowmap report" in traced.stderr  # the next command to type


def test_an_uncaught_exception_prints_its_traceback_and_exits_1(tmp_path, run_cli):
    script = write(tmp_path, "boom.py", """
        def f():
            raise ValueError("boom")
        f()
    """)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert 'raise ValueError("boom")' in r.stderr and "ValueError: boom" in r.stderr
    assert "runpy" not in r.stderr and "cli/trace.py" not in r.stderr
    assert flowmap.load(tmp_path / "run").truncated is False


def test_module_mode(tmp_path, run_cli):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    write(pkg, "job.py", """
        import sys, flowmap
        flowmap.hop("x", "y", {"argv": sys.argv[1:]}, name="args")
        print(__name__, sys.argv[1:])
    """)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "-m", "pkg.job", "--its", "flag", "-o", "z"],
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "__main__ ['--its', 'flag', '-o', 'z']"
    assert len(flowmap.load(tmp_path / "run").hops) == 1


def test_children_are_traced_into_the_same_run(tmp_path, run_cli):
    script = write(tmp_path, "kids.py", """
        import multiprocessing as mp, subprocess, sys
        import flowmap

        def work(tag):
            big = bytearray(5 * 1024 * 1024)
            for _ in range(3):
                flowmap.hop(f"worker/{tag}", "main", {"blob": big}, name="result")

        if __name__ == "__main__":
            for method in ("spawn", "fork", "forkserver"):
                p = mp.get_context(method).Process(target=work, args=(method,))
                p.start(); p.join()
                assert p.exitcode == 0
            subprocess.run([sys.executable, "-c",
                            "import flowmap; flowmap.hop('sub', 'main', b'abc', name='r')"],
                           check=True)
            flowmap.hop("main", "main", 1, name="done")
    """)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    run = flowmap.load(tmp_path / "run")
    by_src = {(h.src, h.nbytes) for h in run.hops}
    for method in ("spawn", "fork", "forkserver"):
        assert (f"worker/{method}", 5 * MiB) in by_src
    assert ("sub", 3) in by_src
    assert len({h.pid for h in run.hops}) == 5
    assert not run.truncated
    # one clock: hops of the children fall between the run's first and last hop
    assert run.hops[-1].name == "done"


def test_torch_multiprocessing_spawn_ranks_are_traced(tmp_path, run_cli):
    script = write(tmp_path, "ranks.py", """
        import flowmap, torch, torch.multiprocessing as tmp

        def rank(k):
            flowmap.set_owner(f"trainer/rank{k}")
            flowmap.hop("batcher", f"trainer/rank{k}", {"x": torch.zeros(256)}, transport="shm")

        if __name__ == "__main__":
            tmp.spawn(rank, nprocs=2)
    """)
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    seams = {(s["dst"], s["transports"]["shm"]) for s in report_json(run_cli, tmp_path / "run")["seams"]}
    assert seams == {("trainer/rank0", 1), ("trainer/rank1", 1)}


LOOP_SCRIPT = """
import sys, time, flowmap
print("ready", flush=True)
i = 0
while True:
    flowmap.hop("a", "b", {"x": bytes(64)}, name="tick", items=[i])
    i += 1
    time.sleep(0.001)
"""


def start_looping(tmp_path):
    script = write(tmp_path, "loop.py", LOOP_SCRIPT)
    proc = subprocess.Popen([sys.executable, "-m", "flowmap", "trace", "-o", str(tmp_path / "run"),
                             str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.0)  # long enough for the background flush to write events
    return proc


def test_sigkill_leaves_a_loadable_prefix(tmp_path, run_cli):
    proc = start_looping(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    run = flowmap.load(tmp_path / "run")
    assert run.truncated
    assert len(run.hops) > 10
    r = run_cli(["report", str(tmp_path / "run")])
    assert r.returncode == 0 and "cut short" in r.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_finalise_the_trace(tmp_path, sig):
    proc = start_looping(tmp_path)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    run = flowmap.load(tmp_path / "run")
    assert not run.truncated, err
    assert len(run.hops) > 10


SIGTERM_INSIDE_AN_EVENT = """
import os, signal, time, flowmap
from flowmap.capture import state
for i in range(50):
    flowmap.hop("a", "b", {"x": bytes(64)}, name="before", items=[i])
state.tracer.lock.acquire()  # the signal lands while this thread records an event
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(60)  # not reached: the handler ends the process
"""


def test_sigterm_in_the_middle_of_an_event_ends_the_program(tmp_path):
    """The SIGTERM handler closes the shard; the lock its own thread holds must not hang it."""
    script = write(tmp_path, "term.py", SIGTERM_INSIDE_AN_EVENT)
    proc = subprocess.run([sys.executable, "-m", "flowmap", "trace", "-o", str(tmp_path / "run"),
                           str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    run = flowmap.load(tmp_path / "run")
    assert not run.truncated
    assert len(run.hops) == 50


def test_report_of_random_bytes_is_one_line_and_exit_2(tmp_path, run_cli):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(2048))
    r = run_cli(["report", str(junk)])
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "not a flowmap trace" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args, needle", [
    (["report", "does/not/exist"], "does not exist"),
    (["trace", "missing.py"], "is not a file"),
    (["trace"], "give a script"),
])
def test_user_mistakes_are_one_line(tmp_path, args, needle, run_cli):
    r = run_cli(args, cwd=tmp_path)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_report_defaults_to_the_newest_run_and_prints_tables(tmp_path, run_cli):
    script = write(tmp_path, "five.py", FIVE_MIB_SCRIPT)
    assert run_cli(["trace", str(script)], cwd=tmp_path).returncode == 0
    r = run_cli(["report"], cwd=tmp_path, env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "A → B" in r.stdout and "500 MiB" in r.stdout and "5.00 MiB" in r.stdout


def test_report_json_document_fields(tmp_path, run_cli):
    script = write(tmp_path, "rl.py", """
        import flowmap, torch
        for step in range(3):
            flowmap.step(step)
            flowmap.hop("rollout/0", "ready_buffer", {"tokens": torch.zeros(8, dtype=torch.int64)},
                        name="trajectory", items=[f"t{step}"])
            with flowmap.owner("driver"):
                flowmap.counter("in_flight", step)
            with flowmap.owner("ready_buffer"):
                if step == 2:
                    flowmap.drop([f"t{step}"], "stale")
    """)
    assert run_cli(["trace", "-o", str(tmp_path / "run"), str(script)]).returncode == 0
    doc = report_json(run_cli, tmp_path / "run")
    (seam,) = doc["seams"]
    assert set(seam) >= {"src", "dst", "name", "hops", "total_bytes", "max_bytes", "p50_bytes",
                         "transports", "leaves"}
    assert seam["leaves"][0] == {**seam["leaves"][0], "path": "tokens", "shape": [8],
                                 "dtype": "int64", "bytes": 64}
    assert {o["name"]: o["role"] for o in doc["owners"]} == {
        "driver": "driver", "ready_buffer": "ready_buffer", "rollout/0": "rollout"}
    c = doc["counters"]["in_flight"]
    assert (c["count"], c["min"], c["max"], c["mean"], c["last"]) == (3, 0, 2, 1, 2)
    assert len(c["series"]) == 3
    assert doc["items"] == {**doc["items"], "total": 3, "consumed": 2, "dropped": 1}
