"""Durable capture: every hop whose `flowmap.hop` returned is in the trace, whatever kills
the process and whenever — inside a long C call holding the GIL too.

The child acknowledges each hop after `hop` returned by writing its number to
an ack file with `os.write` (in the kernel's page cache once the call ends,
like the shard's mapped pages), then the parent SIGKILLs it at a random
moment. Every acknowledged hop must load from the trace.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import flowmap

CHILD = textwrap.dedent("""
    import os, re, sys
    from flowmap.capture import session
    import flowmap
    run_dir, ack_path, c_calls = sys.argv[1], sys.argv[2], sys.argv[3] == "c"
    ack = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    session.start(run_dir)
    i = 0
    while True:
        flowmap.hop("rollout/0", "trainer/0", {"x": b"y" * 64}, name="batch", items=[i])
        os.write(ack, b"%d\\n" % i)
        i += 1
        if c_calls and i % 300 == 0:   # a long C call that holds the GIL
            os.write(ack, b"C\\n")
            if (i // 300) % 2:
                re.match(r"(a+)+$", "a" * 22 + "b")   # catastrophic backtracking
            else:
                bytes(bytearray(150_000_000))         # a big copy
            os.write(ack, b"c\\n")
""")


def _acked(path) -> tuple[list[int], bool]:
    """(acknowledged hop numbers, whether the kill landed inside a C call)."""
    lines = open(path, "rb").read().split(b"\n")
    nums = [int(x) for x in lines if x.isdigit()]
    marks = [x for x in lines if x in (b"C", b"c")]
    return nums, bool(marks) and marks[-1] == b"C"


@pytest.mark.slow
def test_every_returned_hop_survives_sigkill_at_random_moments(tmp_path):
    rng = random.Random(11)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    total_acked = total_kept = in_c_call = 0
    for trial in range(10):
        run_dir, ack = tmp_path / f"run{trial}", tmp_path / f"ack{trial}"
        mode = "c" if trial % 2 else "plain"  # half the kills while hops run, half in C calls
        proc = subprocess.Popen([sys.executable, str(script), str(run_dir), str(ack), mode])
        time.sleep(0.3 + rng.random() * 1.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        acked, in_c = _acked(ack)
        run = flowmap.load(run_dir, detail_hops=None)  # every hop, none folded
        kept = {h.items[0] for h in run.hops}
        missing = [i for i in acked if i not in kept]
        assert not missing, f"trial {trial}: {len(missing)} of {len(acked)} returned hops lost"
        assert run.truncated and run.health.bad_lines == 0
        total_acked += len(acked)
        total_kept += len(kept)
        in_c_call += in_c
    print(f"\n{total_kept} hops kept of {total_acked} returned over 10 SIGKILLs "
          f"({in_c_call} inside a long C call)")
    assert total_acked > 1000 and in_c_call >= 2  # kills inside C calls (and 5 outside)


def test_a_forked_child_that_leaves_by_os_exit_keeps_its_hop(tmp_path):
    with flowmap.tracing(tmp_path / "run"):
        flowmap.hop("parent", "x", 1, items=["before"])
        pid = os.fork()
        if pid == 0:
            flowmap.hop("child", "x", 1, items=["child"])
            os._exit(0)
        os.waitpid(pid, 0)
        flowmap.hop("parent", "x", 1, items=["after"])
    run = flowmap.load(tmp_path / "run")
    by_pid: dict[int, list] = {}
    for h in run.hops:
        by_pid.setdefault(h.pid, []).extend(h.items)
    assert by_pid == {os.getpid(): ["before", "after"], pid: ["child"]}
    assert len(run.shards) == 2


def test_nested_tracing_under_flowmap_trace_joins_the_outer_run(tmp_path, run_cli):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import flowmap
        for i in range(50):
            flowmap.hop("a", "b", i, items=[i])
        with flowmap.tracing("inner-run") as where:
            flowmap.hop("a", "b", 0, items=["inner0"])
            flowmap.hop("a", "b", 0, items=["inner1"])
        for i in range(50, 100):
            flowmap.hop("a", "b", i, items=[i])
        print(where)
    """))
    r = run_cli(["trace", "-o", str(tmp_path / "outer"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    run = flowmap.load(tmp_path / "outer")
    assert len(run.hops) == 102 and not run.truncated
    assert r.stdout.strip() == str(tmp_path / "outer")
    assert r.stderr.count("inside a traced run") == 1
    assert not (tmp_path / "inner-run").exists()


def test_a_deleted_run_directory_is_written_again_with_one_warning(tmp_path, capfd):
    import shutil

    run_dir = tmp_path / "run"
    with flowmap.tracing(run_dir):
        for i in range(100):
            flowmap.hop("a", "b", i, items=[i])
        shutil.rmtree(run_dir)
        for i in range(100, 10_000):  # past two checks of the shard file
            flowmap.hop("a", "b", i, items=[i])
    err = capfd.readouterr().err
    assert err.count("was deleted while tracing") == 1
    run = flowmap.load(run_dir)
    assert [h.items[0] for h in run.hops] == list(range(10_000)) and not run.truncated


def test_an_empty_shard_next_to_good_ones_is_reported_not_fatal(tmp_path, run_cli):
    run_dir = tmp_path / "run"
    with flowmap.tracing(run_dir):
        for i in range(20):
            flowmap.hop("a", "b", i)
    (run_dir / "host-999-0000.flowmap.jsonl").write_bytes(b"")
    r = run_cli(["report", str(run_dir)])
    assert r.returncode == 0, r.stderr
    assert "host-999-0000.flowmap.jsonl is empty" in r.stdout
    assert len(flowmap.load(run_dir).hops) == 20
