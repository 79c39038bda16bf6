"""`trace --aggregate`: the cost of a folded hop next to a written one, and trace bytes
per seam-step.

Run: python bench/bench_aggregate.py  (prints a table)
     python bench/bench_aggregate.py --trainer  (adds the built-in trainer's trace growth)

A folded hop skips the line formatting and the write but still describes its
payload, so it should cost no more than a written one; rounds of the two
modes alternate so a noisy neighbour hits both alike.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_capture import payload, per_call_ns

import flowmap
from flowmap.read.records import Records
from flowmap.read.shards import shard_paths


def cpu_per_hop(run_dir: str, aggregate: int | None, rounds: int = 20) -> float:
    """Best CPU ns per hop over `rounds` rounds of 2000 (past the detail window)."""
    p = payload()
    hop = flowmap.hop
    with flowmap.tracing(run_dir, children=False, aggregate=aggregate):
        flowmap.step(0)
        for _ in range(2000):  # warm the schema table
            hop("rollout/0", "ready_buffer", p, name="trajectory", items=[1])
        flowmap.step(1)  # past a detail window of one step
        return min(per_call_ns(
            lambda: hop("rollout/0", "ready_buffer", p, name="trajectory", items=[1]), 2000,
            repeats=rounds, clock=time.thread_time_ns))


def bytes_per_seam_step(run_dir: str, aggregate: int | None, steps: int = 300,
                        per_step: int = 64) -> tuple[float, int]:
    """(trace bytes per seam-step, total trace bytes) of a repetitive workload."""
    seams = [("driver", "rollout/0", "request"), ("rollout/0", "ready_buffer", "trajectory"),
             ("ready_buffer", "batcher", "trajectory")]
    with flowmap.tracing(run_dir, children=False, aggregate=aggregate):
        for s in range(steps):
            flowmap.step(s)
            for i in range(per_step):
                src, dst, name = seams[i % 3]
                n = 32 + (i * 7) % 16
                traj = {"tokens": torch.zeros(n, dtype=torch.int64), "logprobs": torch.zeros(n),
                        "reward": 0.5}
                flowmap.hop(src, dst, traj, name=name, items=[f"t{i // 3}"], version=s // 10)
    total = sum(os.path.getsize(p) for p in shard_paths(run_dir))
    if aggregate is None:
        return total / (steps * len(seams)), total
    (path,) = shard_paths(run_dir)
    lines = open(path, "rb").read().split(b"\n")
    last_hop = max(i for i, line in enumerate(lines) if line.startswith(b'["h",'))
    after = sum(len(line) + 1 for line in lines[last_hop + 1:])
    (shard,) = Records.read(run_dir).shards
    return after / len({(s.seam, s.step) for s in shard.seam_steps}), total


TRAINER = Path(__file__).resolve().parents[1] / "examples" / "grpo_tiny.py"


def trainer_bytes(run_dir: str, steps: int, aggregate: bool) -> int:
    """Trace bytes of the built-in trainer (synchronous, seeded) over `steps` steps."""
    extra = ["--aggregate"] if aggregate else []
    subprocess.run([sys.executable, "-m", "flowmap", "trace", "-o", run_dir, *extra,
                    str(TRAINER), "--steps", str(steps), "--seed", "0", "--no-progress",
                    "--set", "train.synchronous=true"], check=True, capture_output=True)
    return sum(os.path.getsize(p) for p in shard_paths(run_dir))


def trainer_growth(tmp: str, short: int = 20, long: int = 80) -> None:
    """Bytes each step past the detail window adds to the trainer's trace, both modes.

    Every event that can come once per hop (hops, queue messages, counter
    samples, marks, drops) is folded under --aggregate, so a step adds its
    seam-steps and the few lines that come once a step anyway.
    """
    for mode, aggregate in (("full", False), ("--aggregate", True)):
        a = trainer_bytes(os.path.join(tmp, f"t{mode}{short}"), short, aggregate)
        b = trainer_bytes(os.path.join(tmp, f"t{mode}{long}"), long, aggregate)
        print(f"{'trainer trace bytes per step, ' + mode:52} {(b - a) / (long - short):12.0f} "
              f"{'':>10}")


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        full_ns, agg_ns = [], []
        for r in range(3):
            full_ns.append(cpu_per_hop(os.path.join(tmp, f"full{r}"), None))
            agg_ns.append(cpu_per_hop(os.path.join(tmp, f"agg{r}"), 1))
        full_b, full_total = bytes_per_seam_step(os.path.join(tmp, "bfull"), None)
        agg_b, agg_total = bytes_per_seam_step(os.path.join(tmp, "bagg"), 3)
    print(f"{'measure':52} {'figure':>12} {'target':>10}")
    print(f"{'written hop, 10 tensors (us CPU/call, best)':52} {min(full_ns) / 1000:12.2f} {'':>10}")
    print(f"{'folded hop, 10 tensors (us CPU/call, best)':52} {min(agg_ns) / 1000:12.2f} "
          f"{'<= written':>10}")
    print(f"{'full trace bytes per seam-step (64 hops/step)':52} {full_b:12.0f} {'':>10}")
    print(f"{'--aggregate bytes per seam-step, past detail':52} {agg_b:12.0f} {'<= 200':>10}")
    print(f"{'trace bytes, full / --aggregate (300 steps)':52} "
          f"{full_total:>6} / {agg_total:<6} {'':>4}")
    if "--trainer" in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            trainer_growth(tmp)


if __name__ == "__main__":
    main()
