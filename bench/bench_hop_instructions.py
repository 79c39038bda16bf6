"""Instructions per enabled hop, counted by callgrind: a figure that a loaded machine does not move.

Each tree runs one child under `valgrind --tool=callgrind`, which counts only inside
`functools.reduce` (`--toggle-collect`): the child makes its warm hops outside it, then N hops
inside it, once each way `bench_capture.py` times the hop. The user's way: ten tensors of ten
different shapes, `name=` and `step=` as keywords. The bench's way: ten tensors of one shape,
`name=` and `items=[1]`. An empty region of N calls is counted too and taken off, so the
figure is the hop's own instructions. Trees given on the command line are measured in turn
(`PYTHONPATH` set to each), so a tree before a change and the tree after it compare directly.

Run: python bench/bench_hop_instructions.py [TREE ...] [--hops 2000]
(needs valgrind; a tree must have its C loops built in place, `python setup.py build_ext
--inplace`, to be measured as installed; about a minute per tree, mostly torch's import)
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

CHILD = r"""
import functools, os, sys, tempfile
import torch
import flowmap
torch.set_num_threads(1)
n = int(sys.argv[1])
user = {f"t{i}": torch.zeros(8 + i, 16 * (i + 1)) for i in range(10)}
same = {f"t{i}": torch.zeros(64, 128) for i in range(10)}
hop = flowmap.hop

def region(fn):  # callgrind counts inside functools.reduce only
    functools.reduce(lambda acc, _: fn(), range(n), None)

with tempfile.TemporaryDirectory() as tmp, flowmap.tracing(os.path.join(tmp, "run")):
    for _ in range(200):
        hop("rollout/0", "ready_buffer", user, name="trajectory", step=3)
        hop("rollout/0", "ready_buffer", same, name="trajectory", items=[1])
    region(lambda: None)
    region(lambda: hop("rollout/0", "ready_buffer", user, name="trajectory", step=3))
    region(lambda: hop("rollout/0", "ready_buffer", same, name="trajectory", items=[1]))
print(flowmap.__file__)
"""
REGIONS = ("empty", "user", "bench")


def count(tree: str | None, hops: int) -> dict[str, float]:
    """Instructions per call of each region, less the empty one, in one child."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")  # no idle BLAS threads
    if tree is not None:
        env["PYTHONPATH"] = os.path.abspath(tree)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                        "--toggle-collect=functools_reduce", "--dump-after=functools_reduce",
                        f"--callgrind-out-file={out}", sys.executable, "-c", CHILD, str(hops)],
                       cwd=tmp, env=env, check=True, capture_output=True)
        totals = []
        for part in sorted(glob.glob(out + ".*"), key=lambda p: int(p.rsplit(".", 1)[1])):
            with open(part) as f:
                totals += [int(line.split()[1]) for line in f if line.startswith("summary:")]
    if len(totals) != len(REGIONS):
        raise SystemExit(f"expected {len(REGIONS)} counted regions, found {len(totals)}")
    per = {name: total / hops for name, total in zip(REGIONS, totals)}
    return {name: per[name] - per["empty"] for name in REGIONS[1:]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="*", help="source trees (default: the installed flowmap)")
    ap.add_argument("--hops", type=int, default=2000)
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed; this bench counts instructions with it")
    trees = args.trees or [None]
    print(f"{'tree':40} {'user way (instr/hop)':>22} {'bench way (instr/hop)':>22}")
    for tree in trees:
        got = count(tree, args.hops)
        label = "(installed)" if tree is None else tree[-40:]
        print(f"{label:40} {got['user']:22,.0f} {got['bench']:22,.0f}")


if __name__ == "__main__":
    main()
