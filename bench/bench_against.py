"""flowmap's overhead on the built-in trainer, this tree against another checkout, paired.

A round runs four jobs, each tree's trainer untraced and traced by its own
flowmap (`CHECKOUT/.venv/bin/python`, from `CHECKOUT`; an older flowmap cannot
trace today's trainer through PYTHONPATH), in an order that rotates each round.
Each tree's figure is its traced run over its untraced run of the same round,
so the load of that minute cancels; the two trees' figures of one round are
taken side by side, so their difference is paired. Printed: each tree's median
ratio (wall and CPU, user+sys of the whole tree), and the median of the
per-round differences (this tree less the other) with a 95 % confidence
interval from a bootstrap over rounds.

`--per-process` preloads a tiny library (bench/_exit_rusage.c, built with `cc`)
that writes each process's own CPU time when it exits, so the extra CPU of a
traced run is split into the driver, each trainer rank and the rest (the
resource tracker) in milliseconds: medians of traced less untraced per round.

`--job "SCRIPT ARGS"` measures another job instead of the trainer (SCRIPT from this tree, run
by both trees' Pythons from their own roots), e.g. issue 41's Ray pipeline:
`--job "bench/ray_pipeline_job.py --steps 100"`.

Run: python bench/bench_against.py CHECKOUT [--rounds 21] [--steps 20] [--per-process] [--job ...]
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _bytecode import compile_tree
from peers_stats import Measure, MeasureError, parse_measure, rotated

ROOT = Path(__file__).resolve().parent.parent
MEASURE = Path(__file__).resolve().parent / "_measure.py"
PRELOAD_SRC = Path(__file__).resolve().parent / "_exit_rusage.c"
TRAINER = "examples/grpo_tiny.py"
ROLES = ("driver", "rank", "other")


class RunFailed(Exception):
    """One run did not finish; the message is one line."""


@dataclass(frozen=True)
class Tree:
    name: str  # "this" or "other"
    root: Path

    @property
    def python(self) -> Path:
        return self.root / ".venv" / "bin" / "python"


@dataclass
class Figures:
    """One tree's rounds: ratios, and per-process CPU differences in ms."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    extra_ms: dict[str, list[float]] = field(default_factory=dict)


def roles(rows: Sequence[tuple[int, int, float, str]], total_cpu_s: float) -> dict[str, float]:
    """CPU seconds by role from the preload's lines (pid, ppid, cpu_s, cmdline): the driver
    is the one process whose parent wrote no line (the measuring parent's own line is
    left out), a rank is a multiprocessing child (averaged: the figure
    is per rank), and `other` is the rest of the tree's CPU time (the resource tracker,
    which leaves through `os._exit` and writes no line)."""
    pids = {pid for pid, _, _, _ in rows}
    driver = sum(cpu for _, ppid, cpu, _ in rows if ppid not in pids)
    ranks = [cpu for _, ppid, cpu, cmd in rows if ppid in pids and "spawn_main" in cmd]
    rank = statistics.mean(ranks) if ranks else 0.0
    return {"driver": driver, "rank": rank, "other": total_cpu_s - driver - sum(ranks)}


def parse_exit_rusage(text: str) -> list[tuple[int, int, float, str]]:
    rows = []
    for line in text.splitlines():
        parts = line.split("\t", 5)
        if len(parts) == 6 and MEASURE.name not in parts[5]:
            rows.append((int(parts[0]), int(parts[1]), float(parts[2]) + float(parts[3]),
                         parts[5]))
    return rows


def bootstrap_ci(values: Sequence[float], draws: int = 4000,
                 seed: int = 0) -> tuple[float, float]:
    """95 % interval of the median of `values`, resampled over rounds."""
    rng = random.Random(seed)
    n = len(values)
    meds = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(draws))
    return meds[int(0.025 * draws)], meds[int(0.975 * draws) - 1]


def _build_preload(tmp: Path) -> Path:
    out = tmp / "exit_rusage.so"
    try:
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(out), str(PRELOAD_SRC)],
                       check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise RunFailed(f"--per-process needs a C compiler (`cc`): {exc}") from None
    return out


def _run(tree: Tree, traced: bool, job: list[str], tmp: Path,
         preload: Path | None) -> tuple[Measure, dict[str, float]]:
    out = tmp / "run"
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)
    usage = tmp / "usage.tsv"
    usage.unlink(missing_ok=True)
    if preload is not None:
        env.update(LD_PRELOAD=str(preload), BENCH_EXIT_RUSAGE=str(usage))
    py = str(tree.python)
    cmd = [py, "-m", "flowmap", "trace", "-o", str(out), *job] if traced else [py, *job]
    # -S: no site, so nothing of either tree's start-up runs in the measurer.
    proc = subprocess.run([sys.executable, "-S", str(MEASURE), *cmd], capture_output=True,
                          text=True, env=env, cwd=tree.root)
    try:
        measure = parse_measure(proc.stdout)
    except (MeasureError, ValueError) as exc:
        last = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise RunFailed(f"{tree.name} tree, {'traced' if traced else 'untraced'}: {exc}; "
                        f"last error line: {last[-1] if last else '(none)'}") from None
    by_role: dict[str, float] = {}
    if preload is not None and usage.exists():
        by_role = roles(parse_exit_rusage(usage.read_text()), measure.cpu_s)
    return measure, by_role


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("checkout", type=Path, help="the other tree, with its own .venv")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--per-process", action="store_true",
                    help="split the CPU time by process (needs a C compiler)")
    ap.add_argument("--job", default=None,
                    help="a script of this tree and its arguments, instead of the trainer")
    return ap.parse_args()


def _span(values: Sequence[float]) -> str:
    return f"{min(values):.3f}–{max(values):.3f}"


def main() -> int:
    args = _args()
    if args.rounds < 1 or args.steps < 1:
        print("bench_against: --rounds and --steps must be at least 1", file=sys.stderr)
        return 2
    trees = [Tree("other", args.checkout.resolve()), Tree("this", ROOT)]
    for tree in trees:
        if not tree.python.exists() or (args.job is None and not (tree.root / TRAINER).exists()):
            print(f"bench_against: {tree.root} has no .venv/bin/python or no {TRAINER} "
                  "(run scripts/setup.sh there)", file=sys.stderr)
            return 2
        compile_tree(tree.root)
    job = [TRAINER, "--steps", str(args.steps), "--seed", "0",
           "--set", "train.synchronous=true", "--no-progress"]
    if args.job is not None:
        script, *rest = shlex.split(args.job) or [""]
        if not (ROOT / script).is_file():
            print(f"bench_against: --job: no script {script!r} in this tree", file=sys.stderr)
            return 2
        job = [str(ROOT / script), *rest]
    figures = {t.name: Figures() for t in trees}
    cpu_by: dict[tuple[str, bool], list[dict[str, float]]] = {}
    kinds = [(t, traced) for t in trees for traced in (False, True)]
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="flowmap-against-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            preload = _build_preload(tmp) if args.per_process else None
            for tree in trees:  # warm the page cache and both trees' imports
                _run(tree, False, job, tmp, None)
            for r in range(args.rounds):
                got: dict[tuple[str, bool], tuple[Measure, dict[str, float]]] = {}
                for tree, traced in rotated(kinds, r):
                    got[tree.name, traced] = _run(tree, traced, job, tmp, preload)
                parts = []
                for tree in trees:
                    (plain, plain_roles), (run, run_roles) = got[tree.name, False], got[tree.name, True]
                    f = figures[tree.name]
                    f.wall.append(run.wall_s / plain.wall_s)
                    f.cpu.append(run.cpu_s / plain.cpu_s)
                    cpu_by.setdefault((tree.name, False), []).append(plain_roles)
                    cpu_by.setdefault((tree.name, True), []).append(run_roles)
                    for role in run_roles:
                        f.extra_ms.setdefault(role, []).append(
                            1000 * (run_roles[role] - plain_roles.get(role, 0.0)))
                    parts.append(f"{tree.name} {f.wall[-1]:.3f}× wall {f.cpu[-1]:.3f}× CPU "
                                 f"(plain {plain.wall_s:.2f} s, {plain.cpu_s:.2f} CPU s)")
                print(f"round {r + 1}/{args.rounds}: " + "; ".join(parts), file=sys.stderr,
                      flush=True)
        except RunFailed as exc:
            print(f"bench_against: {exc}", file=sys.stderr)
            return 1
    this, other = figures["this"], figures["other"]
    l1, _, _ = os.getloadavg()
    print(f"{args.rounds} rounds of `{' '.join(job)}`, each tree traced by its own flowmap "
          f"and paired with its own untraced run; load average {load_start:.2f} at the "
          f"start, {l1:.2f} at the end, {os.cpu_count()} CPUs.")
    print(f"other tree: {args.checkout}")
    for label, key in (("wall", "wall"), ("CPU", "cpu")):
        a, b = getattr(this, key), getattr(other, key)
        diffs = [x - y for x, y in zip(a, b, strict=True)]
        lo, hi = bootstrap_ci(diffs)
        print(f"{label:>4}: this {statistics.median(a):.3f}× (rounds {_span(a)}), "
              f"other {statistics.median(b):.3f}× (rounds {_span(b)}); "
              f"this less other {statistics.median(diffs):+.3f} "
              f"[95 % CI {lo:+.3f}, {hi:+.3f}]")
    if args.per_process:
        print("CPU ms by process, median over rounds (traced less untraced of the same round):")
        for role in ROLES:
            a = this.extra_ms.get(role, [])
            b = other.extra_ms.get(role, [])
            if not a or not b:
                continue
            diffs = [x - y for x, y in zip(a, b, strict=True)]
            lo, hi = bootstrap_ci(diffs)
            plain = statistics.median(d[role] for d in cpu_by["this", False] if role in d)
            print(f"  {role + (' (each)' if role == 'rank' else ''):<12} this {statistics.median(a):+7.0f}, "
                  f"other {statistics.median(b):+7.0f}; this less other "
                  f"{statistics.median(diffs):+6.0f} [95 % CI {lo:+.0f}, {hi:+.0f}] "
                  f"(untraced, this tree: {1000 * plain:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
