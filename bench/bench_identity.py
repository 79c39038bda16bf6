"""What sound storage identity costs a hop: a weak reference per new storage, and its callback.

A storage's id is kept only while the tensor that first showed it lives
(`flowmap/writer/storage_table.py`), so each new storage costs a weak reference and two dict
entries when it is first hopped, and a callback when it is freed. A storage met before costs
nothing more. This times hops of ten tensors, fresh each hop (allocated, hopped, freed) and
the same ones each hop, with the writer as shipped and with address-only ids (the old way:
`new_storage` replaced by a plain interning), best of several repeats, per hop.

Run: python bench/bench_identity.py [--hops 3000] [--repeats 5]   (about 20 s)
On a loaded machine the wall figures are noisy: `--instructions` counts each way's
instructions per hop under callgrind instead (about a minute, mostly torch's import).
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import torch

import flowmap
from flowmap.writer.encoder import TraceWriter

SHIPPED = TraceWriter.new_storage
FOREVER = weakref.ref(TraceWriter)  # a holder that outlives the run


def address_only(self: TraceWriter, key: Hashable, holder: Any) -> str:
    """The old identity: an address's id kept for the whole run (its holder never dies)."""
    i = str(self.next_storage)
    self.next_storage += 1
    self.storages[key] = (i, FOREVER)
    return i


def per_hop_us(fn: Callable[[], None], hops: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(hops):
            fn()
        best = min(best, time.perf_counter() - t0)
    return best / hops * 1e6


CHILD = r"""
import functools, os, sys, tempfile
import torch
import flowmap
from flowmap.writer.encoder import TraceWriter
sys.path.insert(0, os.path.dirname(sys.argv[2]))
from bench_identity import SHIPPED, address_only
torch.set_num_threads(1)
n = int(sys.argv[1])
same = {f"t{i}": torch.zeros(8, 16 * (i + 1)) for i in range(10)}
def fresh():
    flowmap.hop("a", "b", {f"t{i}": torch.empty(8, 16 * (i + 1)) for i in range(10)}, name="x")
def alloc():
    {f"t{i}": torch.empty(8, 16 * (i + 1)) for i in range(10)}
def known():
    flowmap.hop("a", "b", same, name="y")
def region(fn):  # callgrind counts inside functools.reduce only
    functools.reduce(lambda acc, _: fn(), range(n), None)
with tempfile.TemporaryDirectory() as tmp, flowmap.tracing(os.path.join(tmp, "run")):
    for _ in range(200):
        fresh(); known()
    region(lambda: None)
    region(alloc)
    for impl in (SHIPPED, address_only):
        TraceWriter.new_storage = impl
        region(fresh)
        region(known)
"""
REGIONS = ("empty", "alloc", "fresh shipped", "known shipped", "fresh old", "known old")


def instructions(hops: int) -> None:
    """Instructions per hop of each way, counted by callgrind (a loaded machine moves none)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                        "--toggle-collect=functools_reduce", "--dump-after=functools_reduce",
                        f"--callgrind-out-file={out}", sys.executable, "-c", CHILD, str(hops),
                        os.path.abspath(__file__)], cwd=tmp, env=env, check=True,
                       capture_output=True)
        totals = []
        for part in sorted(glob.glob(out + ".*"), key=lambda p: int(p.rsplit(".", 1)[1])):
            with open(part) as f:
                totals += [int(line.split()[1]) for line in f if line.startswith("summary:")]
    if len(totals) != len(REGIONS):
        raise SystemExit(f"expected {len(REGIONS)} counted regions, found {len(totals)}")
    per = {name: (total / hops) for name, total in zip(REGIONS, totals)}
    alloc = per["alloc"] - per["empty"]
    print(f"instructions per hop of 10 tensors ({hops} hops a region; fresh: less the "
          f"{alloc:,.0f} of allocating them)")
    for way in ("shipped", "old"):
        print(f"  {way:8s} fresh storages {per['fresh ' + way] - per['empty'] - alloc:10,.0f}   "
              f"same storages {per['known ' + way] - per['empty']:10,.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hops", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--instructions", action="store_true", help="count with callgrind")
    args = ap.parse_args()
    if args.instructions:
        instructions(min(args.hops, 500))
        return
    torch.set_num_threads(1)
    same = {f"t{i}": torch.zeros(8, 16 * (i + 1)) for i in range(10)}

    def fresh() -> None:
        flowmap.hop("a", "b", {f"t{i}": torch.empty(8, 16 * (i + 1)) for i in range(10)}, name="x")

    def known() -> None:
        flowmap.hop("a", "b", same, name="y")

    def alloc_only() -> None:
        {f"t{i}": torch.empty(8, 16 * (i + 1)) for i in range(10)}

    ways = (("weak reference (shipped)", SHIPPED), ("address only (old)", address_only))
    best: dict[str, list[float]] = {label: [float("inf")] * 2 for label, _ in ways}
    with tempfile.TemporaryDirectory() as tmp, flowmap.tracing(os.path.join(tmp, "run")):
        for _ in range(200):
            fresh()
            known()
        for _ in range(args.repeats):  # the two ways in turn: a burst of load hits both
            for label, impl in ways:
                TraceWriter.new_storage = impl  # type: ignore[method-assign]
                row = best[label]
                row[0] = min(row[0], per_hop_us(fresh, args.hops, 1))
                row[1] = min(row[1], per_hop_us(known, args.hops, 1))
    rows = [(label, *best[label]) for label, _ in ways]
    TraceWriter.new_storage = SHIPPED  # type: ignore[method-assign]
    alloc = per_hop_us(alloc_only, args.hops, args.repeats)
    print(f"per hop of 10 tensors, best of {args.repeats} x {args.hops} hops "
          f"(allocating the 10 fresh tensors alone: {alloc:.2f} us, included below)")
    for label, f, k in rows:
        print(f"  {label:26s} fresh storages {f:6.2f} us   same storages {k:6.2f} us")


if __name__ == "__main__":
    main()
