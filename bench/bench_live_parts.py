"""Where a live update's time goes, at points of a long run: what grows with the run, what not.

Run: python bench/bench_live_parts.py [--seconds 600] [--fractions 0.1,0.5,1]
     python bench/bench_live_parts.py --run DIR    # a run already written

Without `--run`, it first writes `bench_live.py`'s program (4 traced processes,
10,000 hops/s together, a step every 1,000 hops of a process) for `--seconds`.
Then, for each fraction, it copies the first part of every shard (whole lines,
the `end` lines left out: a run still being written), reads it with a watch's
reader, and times `--updates` rebuilds as `top` and `serve` make them, part by
part, in CPU time: the records, the per-seam figures, owners and counters, the
view, the flow, the step bins (alone, and again within the page's data),
findings, the page's data and its JSON, and `top`'s screen; then what `serve`
and `top` each spend of them (findings apart: a watch finds them every 5 s). Nothing new is read between the rebuilds, so the figures are
an update's cost without its read (`bench_live.py` measures the whole). A part
that grows from one fraction to the next grows with the run's length.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench_live import PROCS, RATE_HOPS_S, WRITER
from rich.console import Console

from flowmap.findings import findings
from flowmap.live.screen import screen
from flowmap.live.serve import _SameLayout
from flowmap.live.status import status
from flowmap.live.watch import Frame, Watch
from flowmap.model.run import Run
from flowmap.reporters.html_data import html_document
from flowmap.strict_json import dumps

# "step bins" is timed alone and again within "page data" (the page bins by its own count)
SERVE = ("records", "seams", "owners, counters", "view", "flow", "page data", "JSON")
TOP = ("records", "seams", "owners, counters", "screen")


def write_run(path: str, seconds: float, tmp: str) -> None:
    writer = os.path.join(tmp, "live_writer.py")
    with open(writer, "w") as f:
        f.write(WRITER)
    print(f"writing the program's run for {seconds:.0f} s ...", flush=True)
    subprocess.run([sys.executable, writer, path, str(RATE_HOPS_S / PROCS), str(seconds),
                    str(PROCS), "0"], check=True, stdout=subprocess.DEVNULL)


def cut(src: str, dst: str, fraction: float) -> None:
    """The first `fraction` of each shard's lines, as a run still being written holds them."""
    os.makedirs(dst)
    for name in os.listdir(src):
        with open(os.path.join(src, name), "rb") as f:
            data = f.read()
        if name.endswith(".jsonl"):
            lines = data.split(b"\0", 1)[0].split(b"\n")
            keep = [x for x in lines[:max(1, int(len(lines) * fraction))]
                    if not x.startswith(b'["end"')]
            data = b"\n".join(keep) + b"\n"
        with open(os.path.join(dst, name), "wb") as f:
            f.write(data)


def parts(path: str, updates: int) -> tuple[dict[str, float], Run]:
    """CPU ms per update of each part, and the last run built."""
    watch = Watch(path)
    while True:
        watch.reader.poll()
        if not watch.reader.more:
            break
    place, console = _SameLayout(), Console(file=io.StringIO(), width=120)
    spent: dict[str, float] = {}

    def timed(part: str, f: Callable[[], Any]) -> Any:
        t = time.thread_time()
        out = f()
        spent[part] = spent.get(part, 0.0) + time.thread_time() - t
        return out

    def update() -> Run:
        run: Run = timed("records", lambda: watch.reader.records(Run))
        timed("seams", lambda: run.seams)
        timed("owners, counters", lambda: (run.owners, run.counters))
        view = timed("view", lambda: run.view)
        timed("flow", lambda: view.draws_flow)
        timed("step bins", lambda: view.step_bins(200))
        found = timed("findings", lambda: tuple(findings(view)))
        doc = timed("page data", lambda: html_document(view, "auto", place, found))
        timed("JSON", lambda: dumps(doc, sort_keys=True, separators=(",", ":")))
        frame = Frame(run, status(run), {}, found, time.time())
        timed("screen", lambda: console.print(screen(frame)))
        return run

    update()  # as a watch's first update
    spent.clear()
    for _ in range(updates):
        run = update()
    return {k: v / updates * 1000 for k, v in spent.items()}, run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", help="a run already written (default: write the program's)")
    ap.add_argument("--seconds", type=float, default=600.0, help="the written run's length")
    ap.add_argument("--fractions", default="0.1,0.5,1", help="points of the run, comma-separated")
    ap.add_argument("--updates", type=int, default=30, help="rebuilds timed at each point")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = args.run
        if src is None:
            src = os.path.join(tmp, "run")
            write_run(src, args.seconds, tmp)
        rows = []
        for i, fraction in enumerate(float(x) for x in args.fractions.split(",")):
            dst = os.path.join(tmp, f"cut{i}")
            cut(src, dst, fraction)
            ms, run = parts(dst, args.updates)
            rows.append((fraction, len(run.seam_steps), len(run.hops), ms))
    print(f"CPU ms per update, {args.updates} updates at each point (findings: every 5 s in a "
          "watch, here at each)")
    print("  part               " + "".join(f"{f'{f:g} of the run':>16}" for f, *_ in rows))
    print("  (folded steps)     " + "".join(f"{n:>16,}" for _, n, _, _ in rows))
    print("  (kept hops)        " + "".join(f"{k:>16,}" for _, _, k, _ in rows))
    for part in rows[0][3]:
        print(f"  {part:<19}" + "".join(f"{ms[part]:>16.2f}" for *_, ms in rows))
    for name, of in (("serve", SERVE), ("top", TOP)):
        print(f"  = {name:<17}" + "".join(f"{sum(ms[p] for p in of):>16.2f}" for *_, ms in rows))


if __name__ == "__main__":
    main()
