"""What naming the makers of first-step data costs a run with no seam map, once.

As the recording of `flowmap trace SCRIPT` (no map) opens, each array a stage returned in
the watched first step and still alive gets an `o` line naming that stage
(`flowmap.discover.auto.name_makers`): describe it, give its storage an id, write the line.
The watch keeps at most `MAX_MADE` of them, so this times the most it can cost: that many
small tensors, in a traced process, median of a few rounds.

Run: python bench/bench_name_makers.py [--arrays 65536] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch

import flowmap
from flowmap.discover.auto import name_makers
from flowmap.discover.record import MAX_MADE


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arrays", type=int, default=MAX_MADE)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    made = [(torch.randn(16), "rollout") for _ in range(args.arrays)]
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            with flowmap.tracing(os.path.join(tmp, f"run{r}")):
                t = time.perf_counter()
                name_makers(made)
                times.append(time.perf_counter() - t)
    s = statistics.median(times)
    print(f"{args.arrays:,} arrays named in {s:.3f} s (median of {args.rounds}), "
          f"{s / args.arrays * 1e6:.1f} us an array")


if __name__ == "__main__":
    main()
