"""Scale: trace a million (or ten million) hops, then load, aggregate, report and render.

Targets (issue 15): `flowmap report` and `flowmap render --html` of a 10 M-hop
full trace each <= 60 s and <= 2 GB peak RSS; 1 M hops <= 10 s end to end.
Past the detail window (`flowmap.read.fold.DETAIL_HOPS`) the reader folds
hops per seam and step, so memory stays bounded as the trace grows.

Run: python bench/bench_million.py [--hops 1000000 | --ten-million] [--keep DIR]

It prints, each on its line: tracing time and trace size; in-process load,
aggregate (the report document) and HTML render with the process's peak RSS;
then `flowmap report RUN` and `flowmap render RUN --html` as separate
processes, each with its wall time, CPU time and peak RSS (end to end: read,
aggregate, write), and the load average, which says how far the wall times
can be trusted (on a busy machine the CPU time is the closer figure).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import flowmap
from flowmap.reporters.json_document import report_document

SEAMS = [
    ("dataset", "driver", "env_group"), ("driver", "rollout/0", "request"),
    ("driver", "rollout/1", "request"), ("rollout/0", "env", "turn"), ("env", "rollout/0", "reply"),
    ("rollout/0", "ready_buffer", "trajectory"), ("rollout/1", "ready_buffer", "trajectory"),
    ("ready_buffer", "batcher", "trajectory"), ("batcher", "reward", "batch"),
    ("reward", "advantage", "token_level_rewards"), ("advantage", "batcher", "advantages"),
    ("batcher", "trainer/rank0", "micro_batch"), ("batcher", "trainer/rank1", "micro_batch"),
    ("trainer/rank0", "weight_sync", "state_dict"), ("weight_sync", "rollout/0", "weights"),
    ("weight_sync", "rollout/1", "weights"),
]


def trace_synthetic(run_dir: str, hops: int) -> float:
    import numpy as np

    arrays = [np.zeros(n, dtype=np.int64) for n in range(16, 80)]
    t0 = time.perf_counter()
    with flowmap.tracing(run_dir):
        for i in range(hops):
            if i % 1000 == 0:
                flowmap.step(i // 1000)
                flowmap.counter("in_flight", i % 64)
            src, dst, name = SEAMS[i % len(SEAMS)]
            flowmap.hop(src, dst, {"tokens": arrays[i % 64], "reward": 1.0}, name=name,
                        items=[i // 16])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hops", type=int, default=1_000_000)
    ap.add_argument("--ten-million", action="store_true", help="the same as --hops 10000000")
    ap.add_argument("--keep", default=None, help="trace into (or reuse) DIR and keep it")
    ap.add_argument("--no-cli", action="store_true", help="skip the `flowmap` subprocess runs")
    args = ap.parse_args()
    hops = 10_000_000 if args.ten_million else args.hops
    if args.keep:
        run(args.keep, hops, not args.no_cli)
        return
    with tempfile.TemporaryDirectory(prefix="flowmap-bench-") as tmp:  # 54 B/hop: never left
        run(tmp, hops, not args.no_cli)


def run(tmp: str, hops: int, cli: bool) -> None:
    run_dir = os.path.join(tmp, "run")
    if not os.path.isdir(run_dir):
        print(f"tracing {hops} hops: {trace_synthetic(run_dir, hops):.1f} s")
    size = sum(os.path.getsize(os.path.join(run_dir, n)) for n in os.listdir(run_dir))
    print(f"trace size {size / 1e6:.1f} MB ({size / hops:.1f} B/hop)")
    if cli:  # first, so the in-process figures below do not inflate their peak RSS
        html = os.path.join(tmp, "cli.html")
        _timed_cli("report", [run_dir, "--width", "100"])
        _timed_cli("render --html", [run_dir, html, "--html"])
    t0 = time.perf_counter()
    loaded = flowmap.load(run_dir)
    t1 = time.perf_counter()
    report_document(loaded.view)
    t2 = time.perf_counter()
    d = loaded.view.detail
    print(f"load {t1 - t0:.1f} s ({d.hops} hops kept, {d.folded_hops} folded into "
          f"{len(loaded.seam_steps)} seam-steps), aggregate {t2 - t1:.1f} s")
    try:
        from flowmap.reporters.html import write_html
    except ImportError:
        write_html = None
    if write_html is not None:
        out = os.path.join(tmp, "flowmap.html")
        write_html(loaded.view, out)
        t3 = time.perf_counter()
        print(f"html {t3 - t2:.1f} s, {os.path.getsize(out) / 1e6:.2f} MB")
    me = resource.getrusage(resource.RUSAGE_SELF)
    print(f"in-process load+aggregate+render {time.perf_counter() - t0:.1f} s, "
          f"peak RSS {me.ru_maxrss / 1e6:.2f} GB")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def _timed_cli(verb: str, args: list[str]) -> None:
    """Run `flowmap VERB ARGS` as its own process: wall time and that process's peak RSS."""
    cmd = [sys.executable, "-m", "flowmap", *verb.split()[:1], *args]
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(cmd, stdout=null, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode:
        print(f"flowmap {verb} failed ({proc.returncode}): {err.strip()[-300:]}")
        return
    cpu = usage.ru_utime + usage.ru_stime  # on a shared machine, closer to a quiet wall time
    print(f"flowmap {verb}: {wall:.1f} s end to end ({cpu:.1f} s CPU), "
          f"peak RSS {usage.ru_maxrss / 1e6:.2f} GB")


if __name__ == "__main__":
    main()
