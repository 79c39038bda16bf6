"""flowmap beside its peers on the built-in trainer, the whole process, as a user runs it.

Each tool runs the same job (`examples/grpo_tiny.py --steps 20 --seed 0 --set
train.synchronous=true`, which repeats step for step), and the untraced run is
repeated in every round, so each tool's figure is a ratio to the plain run of its
own round: rounds are interleaved (plain, tool A, tool B, ...; the tool order
rotates each round) so the shared VM's noise hits every variant alike.

- wall: median over rounds of (tool wall time / plain wall time of that round);
- CPU: the same ratio of user+sys CPU time of the whole process tree (steadier
  than wall time on a shared VM);
- peak: the same ratio of the largest process's peak RSS (a fresh measuring
  parent per run reads `RUSAGE_CHILDREN`, which is the largest descendant's);
- trace: bytes the tool wrote (files under its output path), median over rounds.

A tool that is not installed is skipped with a line. memray, viztracer and
py-spy come from PyPI (`pip install memray viztracer`); torch.profiler comes with
torch and profiles the driver process (the only one it can see without code).

Run: python bench/bench_peers.py [--rounds 5] [--steps 20] [--tools flowmap,memray,...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAINER = ROOT / "examples" / "grpo_tiny.py"
TORCH_PROFILE = Path(__file__).resolve().parent / "_torch_profile_run.py"

# One measuring parent per run: it runs the command, then prints its children's
# peak RSS (the largest descendant's, in KiB on Linux) and the wall time.
MEASURE = (
    "import resource, subprocess, sys, time\n"
    "t0 = time.perf_counter()\n"
    "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
    "wall = time.perf_counter() - t0\n"
    "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(rc, wall, ru.ru_maxrss, ru.ru_utime + ru.ru_stime)\n"
)

Command = Callable[[list[str], Path], list[str]]


@dataclass
class Tool:
    name: str
    available: Callable[[], str | None]  # None when usable, else why not
    command: Command
    walls: list[float] = field(default_factory=list)
    peaks: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    trace_bytes: list[int] = field(default_factory=list)


def _module(name: str) -> Callable[[], str | None]:
    def check() -> str | None:
        return None if importlib.util.find_spec(name) else f"{name} is not installed"
    return check


def _always() -> str | None:
    return None


def _tools() -> list[Tool]:
    py = sys.executable
    return [
        Tool("flowmap", _always,
             lambda job, out: [py, "-m", "flowmap", "trace", "-o", str(out), *job]),
        Tool("memray --follow-fork", _module("memray"),
             lambda job, out: [py, "-m", "memray", "run", "--follow-fork", "-q",
                               "-o", str(out / "memray.bin"), *job]),
        Tool("torch.profiler (record_shapes, profile_memory)", _module("torch"),
             lambda job, out: [py, str(TORCH_PROFILE), str(out / "torch-trace.json"), *job]),
        Tool("viztracer", _module("viztracer"),
             lambda job, out: [py, "-m", "viztracer", "--quiet",
                               "-o", str(out / "viztracer.json"), "--", *job]),
    ]


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, peak RSS KiB of the largest process, CPU s user+sys of the whole tree)."""
    proc = subprocess.run([sys.executable, "-c", MEASURE, *cmd], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    parts = line.split()
    if proc.returncode != 0 or len(parts) != 4 or parts[0] != "0":
        raise RuntimeError(f"{' '.join(cmd[:4])}... failed:\n{proc.stderr[-2000:]}")
    return float(parts[1]), float(parts[2]), float(parts[3])


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tools", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--json", dest="json_path", help="also write the figures as JSON here")
    args = ap.parse_args()
    job = [str(TRAINER), "--steps", str(args.steps), "--seed", "0",
           "--set", "train.synchronous=true", "--no-progress"]
    tools = _tools()
    if args.tools:
        wanted = {t.strip() for t in args.tools.split(",")}
        tools = [t for t in tools if t.name.split()[0] in wanted]
    usable = []
    for tool in tools:
        why = tool.available()
        if why:
            print(f"skipped {tool.name}: {why}")
        else:
            usable.append(tool)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    plain_walls: list[float] = []
    plain_peaks: list[float] = []
    plain_cpus: list[float] = []
    with tempfile.TemporaryDirectory(prefix="flowmap-peers-") as tmp:
        _run([sys.executable, *job], env)  # warm the page cache and torch's imports
        for r in range(args.rounds):
            wall, peak, cpu = _run([sys.executable, *job], env)
            plain_walls.append(wall)
            plain_peaks.append(peak)
            plain_cpus.append(cpu)
            order = usable[r % len(usable):] + usable[:r % len(usable)] if usable else []
            for tool in order:
                out = Path(tmp) / f"{tool.name.split()[0]}-{r}"
                out.mkdir()
                t_wall, t_peak, t_cpu = _run(tool.command(job, out), env)
                tool.walls.append(t_wall / wall)
                tool.peaks.append(t_peak / peak)
                tool.cpus.append(t_cpu / cpu)
                tool.trace_bytes.append(_size(out))
                shutil.rmtree(out, ignore_errors=True)
            print(f"round {r + 1}/{args.rounds}: plain {wall:.2f} s, {cpu:.2f} CPU s; "
                  + ", ".join(f"{t.name.split()[0]} {t.walls[-1]:.3f}× wall "
                              f"{t.cpus[-1]:.3f}× CPU" for t in usable), flush=True)
    print(f"\nplain run: median {statistics.median(plain_walls):.2f} s, "
          f"CPU {statistics.median(plain_cpus):.2f} s (user+sys, all processes), "
          f"peak {statistics.median(plain_peaks) / 1024:.0f} MB (largest process), "
          f"{args.rounds} rounds\n")
    print("| tool | wall time | CPU time (user+sys) | peak memory (largest process) | trace |")
    print("|---|---:|---:|---:|---:|")
    rows = []
    for tool in usable:
        row = {"tool": tool.name, "wall_ratio": statistics.median(tool.walls),
               "cpu_ratio": statistics.median(tool.cpus),
               "peak_ratio": statistics.median(tool.peaks),
               "trace_bytes": int(statistics.median(tool.trace_bytes))}
        rows.append(row)
        print(f"| {tool.name} | {row['wall_ratio']:.3f}× | {row['cpu_ratio']:.3f}× | "
              f"{row['peak_ratio']:.2f}× | "
              f"{row['trace_bytes'] / 1e6:.2f} MB |")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(
            {"rounds": args.rounds, "steps": args.steps, "tools": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
