"""What `flowmap trace --values` adds: per hop that moves bytes, and to a traced program.

The sampler reads the first 4 hops of each seam, then one in 16; a skipped hop
pays one counter update. This times `flowmap.hop` of an RL batch (ids and
log-probs `[8, 1024]`, routed experts `[1024, 8, 4]`) recorded as `rpc` with
values off and on, interleaved round by round so machine load falls on both
alike, and the cost of one sampled hop's figures alone.

Run: python bench/bench_values.py [--hops 3000] [--rounds 5]; read the figures
on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
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
    with tempfile.TemporaryDirectory() as tmp, flowmap.tracing(tmp):
        t0 = time.perf_counter()
        for _ in range(hops):
            flowmap.hop("rollout", "trainer", payload, name="batch", transport="rpc")
        elapsed = time.perf_counter() - t0
    values.set_enabled(False)
    return elapsed / hops * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hops", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
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


if __name__ == "__main__":
    main()
