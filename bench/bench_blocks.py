"""What an owner block costs inside a trace, by the tensors its stage holds.

Each block reads, as it starts and as it ends, the version counters of the storages its
stage was handed or sent (flowmap/writer/block_writes.py). Prints the CPU time of an
empty `with flowmap.owner(...)` block for a stage that holds 0, 10 and 64 storages
(the bound keeps the latest 32).

Run: python bench/bench_blocks.py
"""

from __future__ import annotations

import tempfile
import time

import torch

import flowmap


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, flowmap.tracing(tmp + "/run"):
        for n in (0, 10, 64):
            name = f"stage{n}"
            held = [torch.zeros(4) for _ in range(n)]
            if held:
                flowmap.hop("src", name, held, name="payload")
            best = float("inf")
            for _ in range(5):
                t0 = time.thread_time_ns()
                for _ in range(5000):
                    with flowmap.owner(name):
                        pass
                best = min(best, (time.thread_time_ns() - t0) / 5000)
            print(f"owner block, its stage holding {n} storages: {best / 1000:.2f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
