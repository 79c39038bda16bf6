"""What a traced child's start-up costs: `python -c 'import torch'` with and without the boot.

Every Python child of a traced run imports `flowmap/capture/_boot/sitecustomize.py`
at start-up, which opens the child's shard and arms the import hooks. With the
trainer's 3-4 traced children that start-up can cost more than all their hops,
so it is measured on its own: the same command, plain and booted, interleaved
(ABAB...), CPU time (user+sys of the child) and wall time, minimum over rounds
(a shared VM's neighbours only ever add time).

Run: python bench/bench_boot.py [--rounds 8] [--code 'import torch']
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

from flowmap.capture.session import child_environment


def run_once(code: str, env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child running `code`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--code", default="import torch")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain = dict(os.environ)
        for key in ("FLOWMAP_RUN_DIR", "FLOWMAP_IMPORT_ROOT"):
            plain.pop(key, None)
        booted = child_environment(os.path.join(tmp, "run"), plain)
        variants = {"plain": plain, "booted (traced child)": booted}
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        run_once(args.code, plain)  # warm the page cache and the .pyc files
        run_once(args.code, booted)
        for r in range(args.rounds):
            names = list(variants) if r % 2 == 0 else list(reversed(variants))
            for name in names:
                results[name].append(run_once(args.code, variants[name]))
    base_cpu = min(c for c, _ in results["plain"])
    base_wall = min(w for _, w in results["plain"])
    print(f"python -c {args.code!r}, min of {args.rounds} interleaved rounds")
    print(f"{'variant':24} {'CPU ms':>8} {'+ms':>7} {'wall ms':>8} {'+ms':>7}")
    for name, runs in results.items():
        cpu = min(c for c, _ in runs)
        wall = min(w for _, w in runs)
        print(f"{name:24} {cpu * 1e3:8.0f} {(cpu - base_cpu) * 1e3:7.0f} "
              f"{wall * 1e3:8.0f} {(wall - base_wall) * 1e3:7.0f}")


if __name__ == "__main__":
    main()
