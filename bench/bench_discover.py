"""Wall and CPU time of `flowmap discover` against the plain run, with the default budget.

Two programs: the built-in trainer (`examples/grpo_tiny.py`, 60 steps, spawned
DP ranks) and a real TRL GRPOTrainer run on CPU (the script of
`tests/integration/test_trl_preset.py`, 2 steps). Each is run plainly and
under discovery, interleaved (ABAB...), so machine noise hits both alike;
the figures are the ratios of the medians, of wall time and of the CPU time
of the process and its children.

Run: python bench/bench_discover.py [--rounds 3] [--only grpo_tiny|trl]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _trl_script(tmp: str) -> list[str]:
    spec = importlib.util.spec_from_file_location(
        "_trl_preset_test", ROOT / "tests" / "integration" / "test_trl_preset.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = os.path.join(tmp, "tiny_grpo.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(mod.TINY_GRPO))
    return [path, os.path.join(tmp, "out")]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_once(program: list[str], discover: bool, tmp: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the run and its children)."""
    if discover:
        cmd = [sys.executable, "-m", "flowmap", "discover", "-o",
               os.path.join(tmp, "seams.yaml"), *program]
    else:
        cmd = [sys.executable, *program]
    cpu0, t0 = _children_cpu(), time.perf_counter()
    r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=1200)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return wall, cpu


def bench(name: str, program: list[str], rounds: int, tmp: str) -> None:
    plain: list[tuple[float, float]] = []
    watched: list[tuple[float, float]] = []
    for _ in range(rounds):
        plain.append(run_once(program, False, tmp))
        watched.append(run_once(program, True, tmp))
    pw, pc = (statistics.median(x[i] for x in plain) for i in (0, 1))
    dw, dc = (statistics.median(x[i] for x in watched) for i in (0, 1))
    print(f"{name}: plain {pw:.1f} s wall / {pc:.1f} s CPU; discover {dw:.1f} s wall / "
          f"{dc:.1f} s CPU; ratio {dw / pw:.2f}x wall, {dc / pc:.2f}x CPU "
          f"(median of {rounds})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", choices=["grpo_tiny", "trl"])
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if a.only in (None, "grpo_tiny"):
            bench("grpo_tiny", [str(ROOT / "examples" / "grpo_tiny.py")], a.rounds, tmp)
        if a.only in (None, "trl"):
            bench("trl GRPOTrainer", _trl_script(tmp), a.rounds, tmp)


if __name__ == "__main__":
    main()
