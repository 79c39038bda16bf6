"""Describe cost of the built-in trainer's own payloads, per seam: the driver's share of a hop.

Runs `examples/grpo_tiny.py` once in this process with `flowmap.hop` replaced by a
recorder (the payloads are kept, nothing is traced), then describes every recorded
payload again and again: with the C column reads (`ccolumns.c`), with the Python
twin (`columns.py`, as `FLOWMAP_PURE_PYTHON=1` runs it), and with every element
walked one by one (the reference). The
figure per mode is CPU time, best of `--rounds`; the three must describe alike.

Run: python bench/bench_payloads.py [--steps 20] [--rounds 7]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

import flowmap
from flowmap.capture.describe import describe
from flowmap.capture.describers import accel, columns, containers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))


def record_payloads(steps: int) -> dict[str, list[Any]]:
    from flowmap.trainer.config import parse_args
    from flowmap.trainer.driver import run

    seams: dict[str, list[Any]] = collections.defaultdict(list)

    def recorder(src: str, dst: str, payload: Any, *, name: str | None = None, **_: Any) -> None:
        seams[name or type(payload).__name__].append(payload)

    real, flowmap.hop = flowmap.hop, recorder  # type: ignore[assignment]
    try:
        run(parse_args(["--steps", str(steps), "--seed", "0", "--set", "train.synchronous=true",
                        "--no-progress"]))
    finally:
        flowmap.hop = real  # type: ignore[assignment]
    return seams


def set_mode(mode: str) -> None:
    """c: the C twin, as installed; python: the Python twin, as `FLOWMAP_PURE_PYTHON=1` runs it
    (long lists only); element: no column reads at all."""
    columns.FOLD[0] = (accel.fold_columns or columns.fold_columns) if mode == "c" else \
        columns.fold_columns
    columns.MIN_ITEMS[0] = 1 if mode == "c" else 8
    columns.RECORDS[0] = mode == "c"
    fold_on = mode != "element"
    columns.columns = _COLUMNS if fold_on else (lambda *args: False)  # type: ignore[assignment]
    containers.record = _RECORD if fold_on else (lambda *args: False)  # type: ignore[assignment]


_COLUMNS, _RECORD = columns.columns, containers.record


def timed(seams: dict[str, list[Any]], rounds: int) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, payloads in seams.items():
            t0 = time.thread_time_ns()
            for p in payloads:
                describe(p)
            best[name] = min(best.get(name, float("inf")), time.thread_time_ns() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    seams = record_payloads(args.steps)
    modes = ["element", "python"] + (["c"] if accel.fold_columns is not None else [])
    results, described = {}, {}
    for mode in modes:
        set_mode(mode)
        described[mode] = [(d.leaves, d.nbytes, d.nodes) for ps in seams.values()
                           for d in map(describe, ps)]
        results[mode] = timed(seams, args.rounds)
    set_mode("c")
    same = all(described[m] == described["element"] for m in modes)
    hops = sum(map(len, seams.values()))
    print(f"{hops} payloads of `grpo_tiny.py --steps {args.steps}` (the driver's hops), "
          f"described {args.rounds}×, best CPU time per seam; modes describe alike: {same}")
    print(f"\n| seam | hops | {' | '.join(modes)} |")
    print(f"|---|---:|{'---:|' * len(modes)}")
    order = sorted(seams, key=lambda s: -results["element"][s])
    for name in order:
        n = len(seams[name])
        cells = " | ".join(f"{results[m][name] / n / 1e3:.1f} µs" for m in modes)
        print(f"| {name} | {n} | {cells} |")
    totals = " | ".join(f"**{sum(results[m].values()) / 1e6:.1f} ms**" for m in modes)
    print(f"| all | {hops} | {totals} |")
    return 0 if same else 1


if __name__ == "__main__":  # spawned rank processes import this file too: keep work in here
    sys.exit(main())
