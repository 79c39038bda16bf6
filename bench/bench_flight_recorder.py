"""What reading PyTorch's Flight Recorder costs the built-in trainer, whole process tree.

Each round runs the same job under `flowmap trace` twice, once reading the
Flight Recorder (the default) and once with `FLOWMAP_FLIGHT_RECORDER=0`,
interleaved (the order swaps every round, so load that drifts cancels), each
measured by a fresh bench/_measure.py (wall, and CPU of every process of the
tree). The figure is the median over rounds of on / off. Run it with
`train.grad_reduce=functional` too: then every gradient all-reduce comes from
the recorder.

A second figure, `--ring N`: the time of one read (dump + parse) of a ring of N
entries, in one gloo process of world size 1: a dump's cost grows with what
the ring holds, which is why flowmap reads it at half full or every 10 s.

Run: python bench/bench_flight_recorder.py [--rounds 5] [--steps 20] [--functional]
     python bench/bench_flight_recorder.py --ring 2000
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from peers_stats import Measure, MeasureError, parse_measure

ROOT = Path(__file__).resolve().parent.parent
MEASURE = Path(__file__).resolve().parent / "_measure.py"
TRAINER = "examples/grpo_tiny.py"


def _run(job: list[str], reading: bool, out: Path) -> Measure:
    env = dict(os.environ, FLOWMAP_FLIGHT_RECORDER="1" if reading else "0")
    cmd = [sys.executable, "-m", "flowmap", "trace", "-o", str(out), *job]
    proc = subprocess.run([sys.executable, "-S", str(MEASURE), *cmd], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    try:
        return parse_measure(proc.stdout)
    except (MeasureError, ValueError) as exc:
        raise SystemExit(f"a run failed ({exc}): {proc.stderr.strip()[-500:]}") from None


def paired(rounds: int, steps: int, functional: bool) -> None:
    job = [TRAINER, "--steps", str(steps), "--seed", "0", "--no-progress",
           "--set", "train.synchronous=true"]
    if functional:
        job += ["--set", "train.grad_reduce=functional"]
    wall: list[float] = []
    cpu: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            got = {reading: _run(job, reading, Path(tmp) / f"r{r}-{int(reading)}")
                   for reading in order}
            wall.append(got[True].wall_s / got[False].wall_s)
            cpu.append(got[True].cpu_s / got[False].cpu_s)
            print(f"round {r + 1}: on {got[True].wall_s:.2f} s / {got[True].cpu_s:.2f} CPU s, "
                  f"off {got[False].wall_s:.2f} s / {got[False].cpu_s:.2f} CPU s", file=sys.stderr)
    print(f"flight recorder on / off, {rounds} rounds of `{' '.join(job)}`: "
          f"wall x{statistics.median(wall):.3f}, CPU x{statistics.median(cpu):.3f} (median); "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


RING = '''
import json, os, sys, time
import torch, torch.distributed as dist
n = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2],
                        rank=0, world_size=1)
t = torch.ones(16)
for _ in range(n):
    dist.all_reduce(t)
dump = torch._C._distributed_c10d._dump_fr_trace_json
times = []
for _ in range(5):
    t0 = time.perf_counter()
    entries = json.loads(dump(True, False))["entries"]
    times.append(time.perf_counter() - t0)
print(f"one read of a ring of {len(entries)} entries: {sorted(times)[2] * 1e3:.1f} ms (median of 5)")
dist.destroy_process_group()
'''


def ring(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCH_FR_BUFFER_SIZE=str(n), GLOO_SOCKET_IFNAME="lo")
        subprocess.run([sys.executable, "-c", RING, str(n), os.path.join(tmp, "store")],
                       env=env, check=True, cwd=ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--functional", action="store_true",
                    help="the trainer sums gradients through functional collectives")
    ap.add_argument("--ring", type=int, default=0, help="time one read of a ring of N entries")
    args = ap.parse_args()
    if args.ring:
        ring(args.ring)
    else:
        paired(args.rounds, args.steps, args.functional)


if __name__ == "__main__":
    main()
