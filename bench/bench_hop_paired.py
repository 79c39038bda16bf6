"""The enabled hop of two source trees, measured in turns so a loaded machine's noise is shared.

Each turn runs one fresh process per tree (`PYTHONPATH` set to the tree), each
timing the hop both ways `bench_capture.py` does: the user's way (ten tensors
of ten shapes, `name=` and `step=`, wall clock, median of rounds; and its CPU
time, best round, which a loaded machine moves less) and the bench's way (ten
tensors of one shape, CPU time, best round). Pin it to one
core for steadier figures: `taskset -c 0 python bench/bench_hop_paired.py OLD NEW`.

Run: python bench/bench_hop_paired.py TREE_A TREE_B [--turns 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ONE = r"""
import json, os, statistics, sys, tempfile, time
import torch
import flowmap
torch.set_num_threads(1)

def per_call(fn, n, repeats, clock):
    out = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(n):
            fn()
        out.append((clock() - t0) / n)
    return out

user = {f"t{i}": torch.zeros(8 + i, 16 * (i + 1)) for i in range(10)}
same = {f"t{i}": torch.zeros(64, 128) for i in range(10)}
hop = flowmap.hop
with tempfile.TemporaryDirectory() as tmp, flowmap.tracing(os.path.join(tmp, "run")):
    for _ in range(2000):
        hop("rollout/0", "ready_buffer", user, name="trajectory", step=3)
        hop("rollout/0", "ready_buffer", same, name="trajectory", items=[1])
    u = per_call(lambda: hop("rollout/0", "ready_buffer", user, name="trajectory", step=3),
                 2000, 11, time.perf_counter_ns)
    uc = per_call(lambda: hop("rollout/0", "ready_buffer", user, name="trajectory", step=3),
                  2000, 11, time.thread_time_ns)
    b = per_call(lambda: hop("rollout/0", "ready_buffer", same, name="trajectory", items=[1]),
                 2000, 11, time.thread_time_ns)
print(json.dumps({"file": flowmap.__file__, "user_ns": statistics.median(u), "user_cpu_ns": min(uc),
                  "bench_ns": min(b)}))
"""


def one(tree: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=tree)
    with tempfile.TemporaryDirectory() as cwd:  # not a checkout's root: PYTHONPATH decides
        out = subprocess.run([sys.executable, "-c", ONE], env=env, cwd=cwd, check=True,
                             capture_output=True, text=True).stdout
    got: dict[str, float] = json.loads(out.splitlines()[-1])
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs=2)
    ap.add_argument("--turns", type=int, default=5)
    args = ap.parse_args()
    rows: dict[str, list[dict[str, float]]] = {t: [] for t in args.trees}
    for _ in range(args.turns):
        for tree in args.trees:
            rows[tree].append(one(tree))
    print(f"{'tree':40} {'user way us (median of turns)':>30} {'user way us CPU (best)':>23} "
          f"{'bench way us CPU (best)':>24}")
    for tree, got in rows.items():
        user = statistics.median(r["user_ns"] for r in got) / 1000
        user_cpu = min(r["user_cpu_ns"] for r in got) / 1000
        bench = min(r["bench_ns"] for r in got) / 1000
        print(f"{tree[-40:]:40} {user:30.2f} {user_cpu:23.2f} {bench:24.2f}")


if __name__ == "__main__":
    main()
