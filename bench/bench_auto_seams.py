"""Overhead of `flowmap trace SCRIPT` with no seam map (seams found in the first step), paired.

For each example script (a single-file GRPO trainer, an actor-critic), the script runs plain
(`python SCRIPT`) and traced (`python -m flowmap trace -o RUN SCRIPT`) in pairs, each in a
fresh interpreter, the plain run first in odd rounds and second in even ones (an order
effect cancels), so machine noise hits both alike. Printed per script: the median wall time
and CPU time (user + sys of the process tree) of each, and the median over rounds of the
traced run over its partner. The target is traced / plain <= 1.15 in wall time.

Run: python bench/bench_auto_seams.py [--rounds 5] [--only actor_critic.py] [--args "--steps 40"]
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {"grpo_single_file.py": ["--steps", "40"], "actor_critic.py": ["--episodes", "40"]}


def timed(cmd: list[str], cwd: str) -> tuple[float, float]:
    """(wall s, CPU s) of one run of `cmd` and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--args", default=None, help="the scripts' arguments (default: longer runs)")
    p.add_argument("--only", choices=sorted(SCRIPTS), help="time this script alone")
    a = p.parse_args()
    for name, default_args in SCRIPTS.items():
        if a.only is not None and name != a.only:
            continue
        script = os.path.join(ROOT, "examples", name)
        args = shlex.split(a.args) if a.args is not None else default_args
        plain, traced = [], []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(a.rounds):
                traced_cmd = [sys.executable, "-m", "flowmap", "trace", "-o",
                              os.path.join(tmp, f"run{i}"), script, *args]
                if i % 2:
                    traced.append(timed(traced_cmd, tmp))
                plain.append(timed([sys.executable, script, *args], tmp))
                if not i % 2:
                    traced.append(timed(traced_cmd, tmp))
        pw, pc = statistics.median(w for w, _ in plain), statistics.median(c for _, c in plain)
        tw, tc = statistics.median(w for w, _ in traced), statistics.median(c for _, c in traced)
        rw = statistics.median(t[0] / p[0] for p, t in zip(plain, traced, strict=True))
        rc = statistics.median(t[1] / p[1] for p, t in zip(plain, traced, strict=True))
        print(f"{name} {' '.join(args)}: plain {pw:.2f} s wall / {pc:.2f} s CPU; traced "
              f"{tw:.2f} s / {tc:.2f} s; traced / plain, median over {a.rounds} paired rounds: "
              f"wall {rw:.3f}x, CPU {rc:.3f}x (rounds {min(t[0] / p[0] for p, t in zip(plain, traced)):.2f}-"
              f"{max(t[0] / p[0] for p, t in zip(plain, traced)):.2f}x wall)")


if __name__ == "__main__":
    main()
