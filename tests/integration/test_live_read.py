"""The incremental reader on real traces: aggregated lines and transport halves included.

GIVEN a program traced for real (`flowmap trace --aggregate --detail-steps 1`:
folded hops `a`, queue messages as send and receive halves `x`/`y` and
their folds `X`/`Y`, counters `c`/`C`), WHEN its shards are written out
again piece by piece, THEN at every point the incremental reader reads what
`flowmap.load` reads from the same bytes.
"""

from __future__ import annotations

import os
import textwrap

import pytest
from flowmap_cli import run_cli
from growing import _grow

PROGRAM = textwrap.dedent("""
    import multiprocessing as mp
    import flowmap

    def worker(q, out):
        flowmap.set_owner("worker/0")
        for s in range(6):
            flowmap.step(s)
            for _ in range(4):
                out.put(q.get() * 2)
                flowmap.counter("queue_seen", s)

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        q, out = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=worker, args=(q, out))
        p.start()
        for s in range(6):
            flowmap.step(s)
            for i in range(4):
                q.put(b"x" * (100 + 10 * i + s))
                flowmap.hop("driver", "rollout/0", {"ids": list(range(3 + i))}, name="batch")
            for _ in range(4):
                out.get()
            flowmap.counter("depth", s)
        p.join()
""")


@pytest.mark.parametrize("aggregate", [True, False])
def test_growing_real_trace_reads_as_the_finished_reader_reads_it(tmp_path, aggregate):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    run = str(tmp_path / "run")
    flags = ["--aggregate", "--detail-steps", "1"] if aggregate else []
    r = run_cli(["trace", "-o", run, *flags, str(script)], cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    kinds = set()
    for name in os.listdir(run):
        if name.endswith(".flowmap.jsonl"):
            with open(os.path.join(run, name), "rb") as f:
                kinds |= {line[2:3] for line in f.read().split(b"\n")[1:] if line}
    assert {b"x", b"y"} <= kinds  # the queue's halves are in the trace
    if aggregate:
        assert {b"a", b"X", b"Y", b"C"} <= kinds, kinds
    for seed in (1, 2):
        assert _grow(run, str(tmp_path / f"live{seed}"), 10, seed, None) >= 6
    assert _grow(run, str(tmp_path / "live-window"), 10, 3, 8) >= 6
