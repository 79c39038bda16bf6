"""What a traced child's start-up costs: `python -c 'import torch'` with and without the boot.

Every Python child of a traced run imports `flowmap/launch/boot/sitecustomize.py`
at start-up, which opens the child's shard and arms the import hooks. With the
trainer's 3-4 traced children that start-up can cost more than all their hops,
so it is measured on its own: the same command, plain and booted, interleaved
(ABAB...), CPU time (user+sys of the child) and wall time, minimum over rounds
(a shared VM's neighbours only ever add time).

With `--cli` it measures the traced process itself instead: `flowmap trace` runs
the program in its own process, so what the CLI costs before the program starts
is overhead too. A one-hop script, run by `python` and by `python -m flowmap trace`.

Run: python bench/bench_boot.py [--rounds 8] [--code 'import torch'] [--cli]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

from _bytecode import compile_tree

from flowmap.capture.session import child_environment

ONE_HOP = 'import flowmap\nflowmap.hop("a", "b", {"x": 1}, name="p")\n'


def run_once(code: str | list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child running `code` (or the command `code`)."""
    cmd = [sys.executable, "-c", code] if isinstance(code, str) else code
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--code", default="import torch")
    ap.add_argument("--cli", action="store_true", help="measure `flowmap trace` of a one-hop script")
    args = ap.parse_args()
    compile_tree()
    with tempfile.TemporaryDirectory() as tmp:
        plain = dict(os.environ)
        for key in ("FLOWMAP_RUN_DIR", "FLOWMAP_IMPORT_ROOT"):
            plain.pop(key, None)
        if args.cli:
            script = os.path.join(tmp, "one_hop.py")
            with open(script, "w", encoding="utf-8") as f:
                f.write(ONE_HOP)
            runs = iter(range(10**6))
            variants = {"plain": (lambda: [sys.executable, script], plain),
                        "flowmap trace": (lambda: [sys.executable, "-m", "flowmap", "trace", "-o",
                                                   os.path.join(tmp, f"run{next(runs)}"), script], plain)}
            title = "python one_hop.py / python -m flowmap trace one_hop.py"
        else:
            booted = child_environment(os.path.join(tmp, "run"), plain)
            variants = {"plain": (lambda: args.code, plain), "booted (traced child)": (lambda: args.code, booted)}
            title = f"python -c {args.code!r}"
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        for make, env in variants.values():  # warm the page cache and the .pyc files
            run_once(make(), env)
        for r in range(args.rounds):
            names = list(variants) if r % 2 == 0 else list(reversed(variants))
            for name in names:
                make, env = variants[name]
                results[name].append(run_once(make(), env))
    base_cpu = min(c for c, _ in results["plain"])
    base_wall = min(w for _, w in results["plain"])
    print(f"{title}, min of {args.rounds} interleaved rounds")
    print(f"{'variant':24} {'CPU ms':>8} {'+ms':>7} {'wall ms':>8} {'+ms':>7}")
    for name, runs in results.items():
        cpu = min(c for c, _ in runs)
        wall = min(w for _, w in runs)
        print(f"{name:24} {cpu * 1e3:8.0f} {(cpu - base_cpu) * 1e3:7.0f} "
              f"{wall * 1e3:8.0f} {(wall - base_wall) * 1e3:7.0f}")


if __name__ == "__main__":
    main()
