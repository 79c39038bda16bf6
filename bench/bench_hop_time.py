"""What the driver's hops cost inside a real traced run of the built-in trainer, per seam.

`bench_payloads.py` times the same payloads in a hot loop; inside the trainer a hop
runs between model calls that have evicted its code and data from the caches, and
costs two to three times as much. This runs `flowmap trace examples/grpo_tiny.py`
in this process with a CPU-time timer around `Tracer.hop` and around `describe`
(each timer read costs ~0.3 µs, included), and prints the driver's totals.

Run: python bench/bench_hop_time.py [--steps 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _bytecode import compile_tree

ROOT = Path(__file__).resolve().parents[1]


def timed_run(steps: int, out: str) -> dict[str, list[int]]:
    import flowmap.capture.describe as describe_mod
    from flowmap.capture import describe_lazy
    from flowmap.capture import tracer as tracer_mod
    from flowmap.cli import trace_run

    per: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])  # hop ns, describe ns, n
    seam = [""]
    real_hop, real_describe = tracer_mod.Tracer.hop, describe_mod.describe

    def describe(payload: Any, dims: Any = None) -> Any:
        t0 = time.thread_time_ns()
        try:
            return real_describe(payload, dims)
        finally:
            per[seam[0]][1] += time.thread_time_ns() - t0

    def hop(self: Any, *args: Any) -> None:
        seam[0] = str(args[3])
        t0 = time.thread_time_ns()
        try:
            real_hop(self, *args)
        finally:
            row = per[str(args[3])]
            row[0] += time.thread_time_ns() - t0
            row[2] += 1

    describe_lazy.describe = describe
    tracer_mod.Tracer.hop = hop  # type: ignore[method-assign]
    try:
        trace_run.run_traced(out, str(ROOT / "examples" / "grpo_tiny.py"), None,
                             ["--steps", str(steps), "--seed", "0", "--set",
                              "train.synchronous=true", "--no-progress"], None)
    finally:
        tracer_mod.Tracer.hop = real_hop  # type: ignore[method-assign]
        describe_lazy.describe = real_describe
    return per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # one run, traced into this directory
    args = ap.parse_args()
    if args.one:  # a traced run owns its process (the session ends at exit): one per child
        print(json.dumps(timed_run(args.steps, args.one)), flush=True)
        return 0
    compile_tree()
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            got = subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--one",
                                  f"{tmp}/run"], capture_output=True, text=True, check=True)
            runs.append(json.loads(got.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda p: sum(r[0] for r in p.values()))
    hops = sum(r[2] for r in best.values())
    total = [sum(r[0] for r in p.values()) / 1e6 for p in runs]
    print(f"the driver's {hops} hops of `grpo_tiny.py --steps {args.steps}`, CPU time inside "
          f"the traced run: {', '.join(f'{t:.1f}' for t in total)} ms in {args.runs} runs; "
          f"the cheapest run per seam:")
    print("\n| seam | hops | per hop | of which describe | total |")
    print("|---|---:|---:|---:|---:|")
    for name, (hop_ns, describe_ns, n) in sorted(best.items(), key=lambda kv: -kv[1][0]):
        if not n:  # described outside `Tracer.hop` only (a transport's message)
            print(f"| {name} | 0 | – | {describe_ns / 1e3:.1f} µs in all | – |")
            continue
        print(f"| {name} | {n} | {hop_ns / n / 1e3:.1f} µs | {describe_ns / n / 1e3:.1f} µs | "
              f"{hop_ns / 1e6:.1f} ms |")
    return 0


if __name__ == "__main__":  # spawned rank processes import the traced script, not this file
    sys.exit(main())
