"""Scale: trace 1,000,000 hops, then load, aggregate, and render the HTML.

Targets (issue 4): HTML <= 2 MB, render <= 20 s and <= 2 GB peak memory.
Run: python bench/bench_million.py [--hops 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

import flowmap
from flowmap.model.document import report_document

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
    ap.add_argument("--keep", default=None)
    args = ap.parse_args()
    if args.keep:
        run(args.keep, args.hops)
        return
    with tempfile.TemporaryDirectory(prefix="flowmap-bench-") as tmp:  # ~50 MB: never left behind
        run(tmp, args.hops)


def run(tmp: str, hops: int) -> None:
    run_dir = os.path.join(tmp, "run")
    if not os.path.isdir(run_dir):
        print(f"tracing {hops} hops: {trace_synthetic(run_dir, hops):.1f} s")
    size = sum(os.path.getsize(os.path.join(run_dir, n)) for n in os.listdir(run_dir))
    print(f"trace size {size / 1e6:.1f} MB ({size / hops:.1f} B/hop)")
    t0 = time.perf_counter()
    run = flowmap.load(run_dir)
    t1 = time.perf_counter()
    report_document(run.view)
    t2 = time.perf_counter()
    print(f"load {t1 - t0:.1f} s, aggregate {t2 - t1:.1f} s")
    try:
        from flowmap.render.html import write_html
    except ImportError:
        write_html = None
    if write_html is not None:
        out = os.path.join(tmp, "flowmap.html")
        write_html(run.view, out)
        t3 = time.perf_counter()
        print(f"html {t3 - t2:.1f} s, {os.path.getsize(out) / 1e6:.2f} MB")
    print(f"total load+aggregate+render {time.perf_counter() - t0:.1f} s, "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")


if __name__ == "__main__":
    main()
