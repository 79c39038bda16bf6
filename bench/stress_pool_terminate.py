"""A `with Pool(2)` block traced many times at once: how often it hangs or loses a result's sender.

`Pool.__exit__` terminates its workers as soon as their last results are in. A traced
worker's SIGTERM handler is Python's: one that lands just before the worker sleeps in its
next `get` was never run (the block hung), and one handled between a result's send and its
record made that result read as from `(untraced)` (flowmap/capture/sigterm.py). Under
load both came often; this counts them.

    python bench/stress_pool_terminate.py [--runs 64] [--at-once 8]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import flowmap

PROGRAM = textwrap.dedent('''
    import multiprocessing as mp, flowmap

    def double(x):
        return [v * 2 for v in x]

    if __name__ == "__main__":
        with mp.get_context("spawn").Pool(2) as pool, flowmap.owner("driver"):
            flowmap.step(3)
            assert pool.map(double, [[1] * 100, [2] * 100], chunksize=1)[1][0] == 4
            assert pool.apply_async(double, ([3] * 100,)).get()[0] == 6
''')
HANG_S = 60


def one(root: str, i: int) -> str:
    """`ok`, `hang` (killed after HANG_S), `failed`, or `untraced` (a result from nobody)."""
    run = os.path.join(root, f"run{i}")
    proc = subprocess.Popen([sys.executable, "-m", "flowmap", "trace", "-o", run, "prog.py"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=root,
                            start_new_session=True)
    try:
        proc.wait(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "hang"
    if proc.returncode:
        return "failed"
    results = [h for h in flowmap.load(run).hops if h.name == "tuple" and h.dst == "driver"]
    return "ok" if all(h.src.startswith("pool/") for h in results) else "untraced"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=64)
    ap.add_argument("--at-once", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as root:
        with open(os.path.join(root, "prog.py"), "w") as f:
            f.write(PROGRAM)
        with ThreadPoolExecutor(args.at_once) as pool:
            got = Counter(pool.map(lambda i: one(root, i), range(args.runs)))
    print(f"{args.runs} runs, {args.at_once} at once: "
          + ", ".join(f"{k} {got[k]}" for k in ("ok", "hang", "untraced", "failed")))
    return 0 if got["ok"] == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
