"""The figures of scripts/device_check.sh, read from its traced runs of the trainer on CUDA.

    python scripts/device_figures.py --runs RUN [RUN ...] --untraced S,S --traced S,S [--config ARGS]

Prints, one line each, what the issue's device check asks for (the targets in
brackets; a line starts with FAIL where a target is missed, and the exit
status is 1 then):

- overhead: median traced wall time over median untraced (<= 1.02x);
- per run, the recorded `all_reduce` bytes of rank 0 per step against the
  parameter bytes (the gradient all-reduce equal to them);
- per run, the CUDA-IPC handle bytes per tensor (< 1 KiB) against the storage
  bytes they open (per weight sync: the parameter bytes);
- the device bounces flowmap found (`device_bounce` findings), or none.

The parameter bytes are computed from the trainer's own model, built with the
configuration the runs used (`--config`: the trainer flags), not read from
the trace, so the comparison can fail.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from collections import defaultdict

import flowmap
from flowmap.findings import DEVICE_BOUNCE, findings

TARGET_OVERHEAD = 1.02
TARGET_HANDLE_BYTES = 1024


def parameter_bytes(trainer_args: list[str]) -> int:
    """Bytes of the trainer's parameters for these flags (its model, built on the CPU)."""
    from flowmap.trainer.config import parse_args
    from flowmap.trainer.driver import model_config
    from flowmap.trainer.model import build_model
    from flowmap.trainer.task import make_tokenizer

    cfg = parse_args([*trainer_args, "--device", "cpu"])
    model = build_model(model_config(cfg, make_tokenizer().vocab_size), cfg.seed)
    itemsize = 8 if cfg.train.dtype == "float64" else 4
    return sum(p.numel() for p in model.parameters()) * itemsize


def _seconds(text: str) -> list[float]:
    return [float(s) for s in text.split(",") if s.strip()]


def overhead(untraced: list[float], traced: list[float]) -> bool:
    if not untraced or not traced:
        print("FAIL overhead: no timings given")
        return False
    ratio = statistics.median(traced) / statistics.median(untraced)
    ok = ratio <= TARGET_OVERHEAD
    print(f"{'' if ok else 'FAIL '}overhead: traced {statistics.median(traced):.2f} s / untraced "
          f"{statistics.median(untraced):.2f} s = {ratio:.3f}x  [<= {TARGET_OVERHEAD}x] "
          f"(medians of {len(traced)} and {len(untraced)} runs)")
    return ok


def all_reduce(run: flowmap.Run, name: str, params: int) -> bool:
    per_step: dict[int | None, list[int]] = defaultdict(list)
    for h in run.events.hops:
        if h.src == "trainer/rank0" and h.name == "all_reduce":
            per_step[h.step].append(h.nbytes)
    if not per_step:
        print(f"{name}: no all_reduce recorded (one rank: nothing to reduce)")
        return True
    grads = [max(sizes) for sizes in per_step.values()]
    ok = all(g == params for g in grads)
    rest = statistics.mean(sum(s) - max(s) for s in per_step.values())
    print(f"{'' if ok else 'FAIL '}{name}: all_reduce of the gradients {min(grads):,}..{max(grads):,} "
          f"B/step against {params:,} B of parameters  [equal] (+{rest:,.0f} B/step of metrics; "
          f"{len(per_step)} steps)")
    return ok


def ipc(run: flowmap.Run, name: str, params: int) -> bool:
    hops = [h for h in run.events.hops if h.transport == "cuda_ipc"]
    if not hops:
        print(f"FAIL {name}: no cuda_ipc hop recorded (the weight sync did not go by IPC)")
        return False
    handle = [h.wire_bytes or 0 for h in hops]
    joined = [h for h in hops if h.dst != "(untraced)" and h.src != "(untraced)"]
    storage: dict[int | None, int] = defaultdict(int)
    for h in joined:
        storage[h.step] += h.nbytes
    syncs = sorted(set(storage.values()))
    ok = max(handle) < TARGET_HANDLE_BYTES and syncs == [params] and len(joined) == len(hops)
    print(f"{'' if ok else 'FAIL '}{name}: {len(hops)} cuda_ipc hops ({len(joined)} joined "
          f"sender to receiver), handle bytes per tensor {min(handle)}..{max(handle)}  "
          f"[< {TARGET_HANDLE_BYTES}], storage bytes opened per sync {syncs} against "
          f"{params:,} B of parameters")
    return ok


def bounces(run: flowmap.Run, name: str) -> None:
    found = [f for f in findings(run.view) if f.kind == DEVICE_BOUNCE]
    print(f"{name}: device bounces found: {len(found) or 'none'}")
    for f in found:
        print(f"  {f.bytes_per_step:,.0f} B/step  {f.message}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="+", required=True, metavar="RUN")
    p.add_argument("--untraced", default="", help="seconds of the untraced runs, comma list")
    p.add_argument("--traced", default="", help="seconds of the traced runs, comma list")
    p.add_argument("--config", default="", help="the trainer flags the runs used")
    ns = p.parse_args(argv)
    params = parameter_bytes(shlex.split(ns.config))
    ok = overhead(_seconds(ns.untraced), _seconds(ns.traced))
    for path in ns.runs:
        run = flowmap.load(path)
        name = path.rstrip("/").rsplit("/", 1)[-1]
        ok = all_reduce(run, name, params) and ok
        ok = ipc(run, name, params) and ok
        bounces(run, name)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
