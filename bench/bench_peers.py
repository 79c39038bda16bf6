"""flowmap beside its peers on the built-in trainer, the whole process tree, as a user runs it.

Each tool runs the same job (`examples/grpo_tiny.py --steps 20 --seed 0 --set
train.synchronous=true`, which repeats step for step), each run paired with an
untraced run right next to it: a round is plain, tool A, plain, tool B, ... in
even rounds and tool A, plain, tool B, plain, ... in odd ones (an effect of the
order cancels); the tool
order rotates each round. The shared VM's load moves within seconds, so a
ratio to a plain run minutes away measures the load more than the tool.

- wall and CPU (user+sys of every process of the tree): median over rounds of
  (tool / its paired plain run); CPU time is the less noisy on a shared VM;
- peak: the same ratio of the largest process's peak RSS (a fresh measuring
  parent per run, bench/_measure.py, reads `RUSAGE_CHILDREN`);
- trace: bytes of every file the tool left in its output directory (median);
- processes traced: how many processes that output covers (the fewest over
  rounds), so a tool that missed a child shows it.

How each tool follows the tree is in bench/peers_tools.py. A tool that is not
installed, or that fails, gets one line and the others go on; the exit status
is 0 unless no tool ran. memray, viztracer and py-spy: `pip install -e .[bench]`.

The progress goes to stderr; stdout is the markdown block docs/performance.md
shows. `--markdown docs/performance.md` also replaces that block in the file
(between its `bench_peers` markers).

Run: python bench/bench_peers.py [--rounds 5] [--steps 20] [--tools flowmap,memray,torch,viztracer]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _bytecode import compile_tree
from peers_stats import (
    BEGIN_MARK,
    Measure,
    MeasureError,
    Row,
    Samples,
    doc_block,
    parse_measure,
    partner_first,
    rotated,
    round_line,
    splice,
    summarize,
)
from peers_tools import Tool, all_tools, boot_env, trace_bytes

ROOT = Path(__file__).resolve().parent.parent
MEASURE = Path(__file__).resolve().parent / "_measure.py"
TRAINER = "examples/grpo_tiny.py"


class RunFailed(Exception):
    """One run did not finish; the message is one line."""


def _measure(cmd: list[str], env: dict[str, str]) -> Measure:
    # -S: no site, so a tool's start-up hook (bench/_peer_boot) never wraps the measurer.
    proc = subprocess.run([sys.executable, "-S", str(MEASURE), *cmd], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    try:
        return parse_measure(proc.stdout)
    except (MeasureError, ValueError) as exc:
        last = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise RunFailed(f"{exc}; last error line: {last[-1] if last else '(none)'}") from None


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tools", default="", help="comma-separated subset of "
                    + ",".join(t.key for t in all_tools()) + " (default: all)")
    ap.add_argument("--markdown", type=Path, help="replace the bench_peers block of this file")
    ap.add_argument("--json", dest="json_path", type=Path, help="also write the figures here")
    return ap.parse_args()


def _command(args: argparse.Namespace) -> str:
    """The command as the docs show it: what shapes the figures, and no machine paths."""
    cmd = ["python", "bench/bench_peers.py", "--rounds", str(args.rounds)]
    if args.steps != 20:
        cmd += ["--steps", str(args.steps)]
    if args.tools:
        cmd += ["--tools", args.tools]
    if args.markdown:
        try:
            cmd += ["--markdown", str(args.markdown.resolve().relative_to(ROOT))]
        except ValueError:
            pass
    return shlex.join(cmd)


def _context(job: list[str], args: argparse.Namespace, plains: list[Measure],
             load_start: float) -> str:
    l1, l5, l15 = os.getloadavg()
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = "not installed"
    return (
        f"{args.rounds} round{'s' if args.rounds > 1 else ''} of `{shlex.join(job)}`, the whole "
        "process tree; each figure is the "
        "median over rounds of the tool's run divided by its untraced partner, run just before it "
        "in odd rounds and just after it in even ones (rounds interleaved, tool order rotated). "
        "Untraced runs: median "
        f"{statistics.median(m.wall_s for m in plains):.2f} s wall, "
        f"{statistics.median(m.cpu_s for m in plains):.2f} CPU s, peak "
        f"{statistics.median(m.peak_kib for m in plains) / 1024:.0f} MB (largest process). "
        f"Load average {load_start:.2f} at the start, {l1:.2f} / {l5:.2f} / {l15:.2f} "
        f"(1 / 5 / 15 min) at the end, on {os.cpu_count()} CPUs; Python "
        f"{platform.python_version()}, torch {torch}."
    )


def _select(args: argparse.Namespace) -> tuple[list[Tool], list[str]] | str:
    tools = all_tools()
    if args.tools:
        wanted = [t.strip() for t in args.tools.split(",") if t.strip()]
        unknown = sorted(set(wanted) - {t.key for t in tools})
        if unknown:
            return f"unknown tool {', '.join(unknown)}; choose from {', '.join(t.key for t in tools)}"
        tools = [t for t in tools if t.key in wanted]
    notes = [f"{t.label}: skipped, {why}" for t in tools if (why := t.missing())]
    return [t for t in tools if not t.missing()], notes


def main() -> int:
    args = _args()
    if args.rounds < 1 or args.steps < 1:
        print("bench_peers: --rounds and --steps must be at least 1", file=sys.stderr)
        return 2
    if args.markdown and args.markdown.exists() and BEGIN_MARK not in args.markdown.read_text():
        print(f"bench_peers: {args.markdown} has no {BEGIN_MARK} block to replace", file=sys.stderr)
        return 2
    selected = _select(args)
    if isinstance(selected, str):
        print(f"bench_peers: {selected}", file=sys.stderr)
        return 2
    active, notes = selected
    for note in notes:
        print(note, file=sys.stderr)
    if not active:
        print("bench_peers: no tool to run", file=sys.stderr)
        return 1
    job = [TRAINER, "--steps", str(args.steps), "--seed", "0",
           "--set", "train.synchronous=true", "--no-progress"]
    plain_cmd = [sys.executable, *job]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    samples = {t.key: Samples() for t in active}
    plains: list[Measure] = []
    round_lines: list[str] = []
    load_start = os.getloadavg()[0]
    compile_tree()
    with tempfile.TemporaryDirectory(prefix="flowmap-peers-") as tmp:
        try:
            _measure(plain_cmd, env)  # warm the page cache and torch's imports
            for r in range(args.rounds):
                round_plains: list[Measure] = []
                for tool in rotated(list(active), r):
                    out = Path(tmp) / f"{tool.key}-{r}"
                    out.mkdir()
                    if partner_first(r):
                        plain = _measure(plain_cmd, env)
                    try:
                        run = _measure(tool.command(job, out), boot_env(tool, out, env))
                    except RunFailed as exc:
                        notes.append(f"{tool.label}: failed in round {r + 1}, {exc}")
                        print(notes[-1], file=sys.stderr)
                        active.remove(tool)
                        del samples[tool.key]
                        shutil.rmtree(out, ignore_errors=True)
                        continue
                    if not partner_first(r):
                        plain = _measure(plain_cmd, env)
                    round_plains.append(plain)
                    samples[tool.key].add(run, plain, trace_bytes(out), tool.processes(out))
                    warning = tool.warning(out)
                    if warning and f"{tool.label}: {warning}" not in notes:
                        notes.append(f"{tool.label}: {warning}")
                    if run.unreaped:
                        notes.append(f"{tool.label}: {run.unreaped} process(es) outlived "
                                     f"the run by a minute in round {r + 1}")
                    shutil.rmtree(out, ignore_errors=True)
                ratios = [(t.key, samples[t.key].wall[-1], samples[t.key].cpu[-1])
                          for t in active]
                if not round_plains:
                    break
                plains += round_plains
                round_lines.append(round_line(r, args.rounds, round_plains, ratios))
                print(round_lines[-1], file=sys.stderr, flush=True)
        except RunFailed as exc:
            print(f"bench_peers: the untraced run failed, so nothing compares: {exc}",
                  file=sys.stderr)
            return 1
    rows: list[Row] = [summarize(t.label, samples[t.key]) for t in active]
    if not rows:
        print("bench_peers: no tool finished a round", file=sys.stderr)
        return 1
    block = doc_block(_command(args), _context(job, args, plains, load_start), round_lines,
                      rows, notes)
    print(block)
    if args.markdown:
        text = args.markdown.read_text() if args.markdown.exists() else ""
        args.markdown.write_text(splice(text, block) if text else block + "\n")
    if args.json_path:
        args.json_path.write_text(json.dumps(
            {"rounds": args.rounds, "steps": args.steps,
             "rows": [r.__dict__ for r in rows], "notes": notes}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
