"""What `flowmap trace --values` adds: per hop that moves bytes, and to a traced program.

The sampler reads the first hop of each seam, then (the first 4, and one in 16
after) while its reading stays under 2 % of the time since it started; a
skipped hop pays a counter update and a clock read. This times `flowmap.hop` of an RL batch (ids and
log-probs `[8, 1024]`, routed experts `[1024, 8, 4]`) recorded as `rpc` with
values off and on, interleaved round by round so machine load falls on both
alike, and the cost of one sampled hop's figures alone. Then the same on
bench_overhead.py's small train loop (6 hops a step, one of them `shm`):
untraced, traced, traced with values, interleaved; the ratios of the medians,
and the share of the values run's wall time the sampler spent reading (its own
clock: steadier than the ratios when the machine is busy).

Run: python bench/bench_values.py [--hops 3000] [--rounds 5]; read the figures
on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

import flowmap
from flowmap.capture import values


def batch() -> dict[str, torch.Tensor]:
    return {"input_ids": torch.randint(0, 151_000, (8, 1024)),
            "logprobs": torch.randn(8, 1024),
            "routed_experts": torch.randint(0, 64, (1024, 8, 4), dtype=torch.int32)}


def per_hop(hops: int, on: bool, payload: dict[str, torch.Tensor]) -> float:
    values.set_enabled(on)
    values._seen.clear()
    values._clock.update(start=0.0, spent=0.0)
    with tempfile.TemporaryDirectory() as tmp, flowmap.tracing(tmp):
        t0 = time.perf_counter()
        for _ in range(hops):
            flowmap.hop("rollout", "trainer", payload, name="batch", transport="rpc")
        elapsed = time.perf_counter() - t0
    values.set_enabled(False)
    return elapsed / hops * 1e6


def trainer(steps: int, mode: str, tmp: str, i: int) -> float:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_overhead import make_model, train

    model = make_model()
    values.set_enabled(mode == "values")
    values._seen.clear()
    values._clock.update(start=0.0, spent=0.0)
    t0 = time.perf_counter()
    if mode == "untraced":
        train(model, steps)
    else:
        with flowmap.tracing(f"{tmp}/run{i}-{mode}"):
            train(model, steps)
    wall = time.perf_counter() - t0
    if mode == "values":
        SPENT.append(values._clock["spent"] / wall)
    values.set_enabled(False)
    return wall


SPENT: list[float] = []  # the share of a values run's wall time spent reading values


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hops", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=150)
    a = ap.parse_args()
    payload = batch()
    off, on = [], []
    for _ in range(a.rounds):
        off.append(per_hop(a.hops, False, payload))
        on.append(per_hop(a.hops, True, payload))
    t0 = time.perf_counter()
    for _ in range(50):
        values.figures(payload)
    sampled = (time.perf_counter() - t0) / 50 * 1e6
    print(f"hop, values off: {statistics.median(off):8.1f} µs (median of {a.rounds})")
    print(f"hop, values on:  {statistics.median(on):8.1f} µs "
          f"({statistics.median(on) / statistics.median(off):.3f}x)")
    print(f"one sampled hop's figures: {sampled:8.1f} µs "
          f"({sum(p.numel() for p in payload.values()):,} elements)")
    times: dict[str, list[float]] = {"untraced": [], "traced": [], "values": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.rounds):
            for mode in times:
                times[mode].append(trainer(a.steps, mode, tmp, i))
    base = statistics.median(times["untraced"])
    for mode, ts in times.items():
        print(f"train loop, {mode:9}: {statistics.median(ts):.3f} s "
              f"({statistics.median(ts) / base:.3f}x untraced)")
    print(f"train loop, time spent reading values: {100 * statistics.median(SPENT):.2f} % of its "
          "wall time (median; the sampler's own figure, steadier than the ratios on a busy machine)")


if __name__ == "__main__":
    main()
