"""Two source trees write the same trace for the same workload: a check for changes that must
not change the trace format (a faster hop, a restructure).

Each tree traces one fixed workload in a fresh process (`PYTHONPATH` set to the tree): dicts of
tensors of ten shapes, one resized in place and one replaced by another dtype, nested dicts,
views, lists, dims, items of ints and strings, steps, versions and two transports, over four
seams. Every tensor stays alive, so storage ids do not depend on the allocator handing a freed
address out again. The shards are compared line by line, less what differs between any two
runs: the header line (pids, times, argv), each event's time and the end line's time. With
`--pure` each tree also runs with its C loops off (`FLOWMAP_PURE_PYTHON=1`).

Run: python bench/bench_trace_same.py OLD_TREE NEW_TREE [--pure]
(a tree's C loops must be built in place, `python setup.py build_ext --inplace`, to be used)
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

WORKLOAD = r"""
import sys
import torch
import flowmap
alive = []  # every tensor stays alive: storage ids do not follow the allocator
keep = {f"t{i}": torch.zeros(8 + i, 16 * (i + 1)) for i in range(10)}
with flowmap.tracing(sys.argv[1]):
    for i in range(400):
        flowmap.step(i // 40)
        if i % 50 == 7:  # a shape changed in place (a view's shape: its storage stays)
            keep["t3"].as_strided_((2 + i % 5, 4), (4, 1))
        if i % 70 == 9:  # the same path, another dtype
            alive.append(keep["t4"])
            keep["t4"] = torch.zeros(5, dtype=[torch.float16, torch.int64, torch.bfloat16][i % 3])
        flowmap.hop("rollout/0", "ready_buffer", keep, name="trajectory", step=i // 10)
        fresh = {"tokens": torch.zeros(32 + i % 7, dtype=torch.int64), "lp": torch.zeros(32 + i % 7),
                 "inner": {"a": torch.ones(i % 4 + 1), "b": torch.ones(6)[::2]}, "r": 0.5}
        alive.append(fresh)
        flowmap.hop("ready_buffer", "trainer", fresh, name="batch", items=[i, i + 1],
                    version=i // 100, dims={"tokens": ("t",)} if i % 2 else None)
        flowmap.hop("trainer", "ready_buffer", [keep["t0"], keep["t0"].view(-1)], name="pair",
                    transport="ref" if i % 3 else "copy")
        flowmap.hop("a", "b", {"x": keep["t1"], "y": keep["t1"]}, items=["s%d" % i])
"""
EVENT_TIME = re.compile(r'^\["([A-Za-z]+)",[0-9]+,')


def trace(tree: str, pure: bool) -> list[str]:
    """The workload's shard from `tree`, less what differs between any two runs."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    env.pop("FLOWMAP_PURE_PYTHON", None)
    if pure:
        env["FLOWMAP_PURE_PYTHON"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        subprocess.run([sys.executable, "-c", WORKLOAD, run], cwd=tmp, env=env, check=True)
        (shard,) = glob.glob(os.path.join(run, "*.flowmap.jsonl"))
        with open(shard, encoding="utf-8") as f:
            lines = f.read().splitlines()[1:]  # the header: pids, times, argv
    return [EVENT_TIME.sub(r'["\1",T,', line) for line in lines if not line.startswith('["end"')]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs=2)
    ap.add_argument("--pure", action="store_true", help="also run each tree with its C loops off")
    args = ap.parse_args()
    runs = [(tree, pure) for tree in args.trees for pure in ([False, True] if args.pure else [False])]
    first = trace(*runs[0])
    same = True
    for tree, pure in runs[1:]:
        got = trace(tree, pure)
        label = f"{tree}{' (pure Python)' if pure else ''}"
        if got == first:
            print(f"same: {label} ({len(got)} lines)")
            continue
        same = False
        at = next((i for i, (a, b) in enumerate(zip(first, got)) if a != b), min(len(first), len(got)))
        print(f"DIFFERENT: {label}, line {at + 2}:\n  {first[at] if at < len(first) else '(none)'}"
              f"\n  {got[at] if at < len(got) else '(none)'}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
