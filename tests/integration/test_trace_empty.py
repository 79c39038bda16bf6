"""A traced program that recorded nothing is told so, with the ways to record something."""

from __future__ import annotations

import importlib.util
import textwrap

from flowmap.seams.presets import available


def _trace(tmp_path, run_cli, body: str):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(body))
    r = run_cli(["trace", "-o", str(tmp_path / "run"), str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return r.stderr.strip().splitlines()


def test_a_run_without_hops_ends_with_what_to_try(tmp_path, run_cli):
    lines = _trace(tmp_path, run_cli, """
        import flowmap
        flowmap.counter("queue", 3)      # events, but no hop
        print("hello")
    """)
    last = lines[-1]
    assert "no hops were recorded" in last
    for hint in ("flowmap.hop", "--seams", "--preset", *available()):
        assert hint in last
    if importlib.util.find_spec("flowmap.cli.discover") is not None:
        assert "flowmap discover" in last


def test_a_hop_in_a_spawned_child_counts(tmp_path, run_cli):
    lines = _trace(tmp_path, run_cli, """
        import multiprocessing as mp
        import flowmap

        def child():
            flowmap.hop("child/0", "main", b"abc", name="r")

        if __name__ == "__main__":
            p = mp.get_context("spawn").Process(target=child)
            p.start(); p.join()
    """)
    assert "next: flowmap report" in lines[-1]
    assert not any("no hops" in line for line in lines)
