"""What the leaf notes add to a hop that moves bytes (`flowmap.capture.leaf_notes`).

A hop whose transport is not `ref` is walked once more for views (the storage
behind them) and small CPU masks (their real positions): this times the same
payloads recorded as `ref` (no notes) and as `shm` (notes), interleaved round by
round so machine load falls on both alike. Payloads: ten plain tensors (the
common case: one attribute read each), the same with one view, and with a mask.

Run: python bench/bench_leaf_notes.py [--hops 5000] [--rounds 5]; read the
figures on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

import flowmap


def payloads() -> dict[str, dict[str, torch.Tensor]]:
    plain = {f"t{i}": torch.zeros(64, 64) for i in range(10)}
    big = torch.zeros(1024, 64)
    return {
        "10 tensors": plain,
        "+ a view": {**plain, "row": big[:1]},
        "+ a mask": {**plain, "attention_mask": torch.ones(8, 128, dtype=torch.bool)},
        "shared slot": slot_views(),
    }


def slot_views() -> dict[str, torch.Tensor]:
    """The built-in trainer's micro-batch: six views of one slot in shared memory (its
    `shm_pool`), two of them masks, as a rank hands them on."""
    slot = torch.zeros(1 << 16, dtype=torch.uint8).share_memory_()
    out: dict[str, torch.Tensor] = {}
    offset = 0
    for name, dtype in (("input_ids", torch.int64), ("attention_mask", torch.int64),
                        ("response_mask", torch.int64), ("position_ids", torch.int64),
                        ("rollout_log_probs", torch.float32), ("advantages", torch.float32)):
        n = 8 * 40 * dtype.itemsize
        out[name] = slot[offset:offset + n].view(dtype).view(8, 40)
        offset += n
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hops", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    times: dict[tuple[str, str], list[float]] = {}
    with flowmap.tracing(tempfile.mkdtemp()):
        for _ in range(args.rounds):
            for label, payload in payloads().items():
                for transport in ("ref", "shm"):
                    t = time.perf_counter()
                    for _ in range(args.hops):
                        flowmap.hop("a", "b", payload, name=label, transport=transport)
                    times.setdefault((label, transport), []).append(
                        (time.perf_counter() - t) / args.hops * 1e6)
    for label in payloads():
        ref = statistics.median(times[(label, "ref")])
        shm = statistics.median(times[(label, "shm")])
        print(f"{label:12}  ref {ref:7.2f} µs/hop   shm (with notes) {shm:7.2f} µs/hop   "
              f"+{shm - ref:6.2f} µs")


if __name__ == "__main__":
    main()
