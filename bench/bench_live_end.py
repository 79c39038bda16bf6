"""How soon a piped `flowmap top` ends once the program it watches has ended.

Run: python bench/bench_live_end.py [--seconds 20] [--rate 20000]

Issue 39's measure: 2 traced processes, each writing `--rate` hops a second for
`--seconds` (a step every 1,000 hops of a process), watched from the start by
`flowmap top` without a terminal (stdin and stdout piped), which ends by itself
once the program has ended. Prints the hops written, the rate reached, and the
seconds from the program's end to `top`'s exit (the target: within 3 s), with
`top`'s share of a core and its peak RSS.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

FLOWMAP = [sys.executable, "-m", "flowmap"]

WRITER = r'''
import multiprocessing as mp, sys, time
import flowmap

def work(k, rate, seconds):
    payload = {"tokens": b"x" * 512, "ids": list(range(16))}
    n, step, t0 = 0, 0, time.monotonic()
    while True:
        now = time.monotonic() - t0
        if now >= seconds:
            break
        if n >= int(now * rate) + 1:
            time.sleep(0.001)
            continue
        if n % 1000 == 0:
            step += 1
            flowmap.step(step)
        flowmap.hop(f"rollout/{k}", "ready_buffer", payload, name="trajectory", step=step)
        n += 1

if __name__ == "__main__":
    run, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    ctx = mp.get_context("spawn")
    with flowmap.tracing(run):
        ps = [ctx.Process(target=work, args=(k, rate, seconds)) for k in range(2)]
        for p in ps:
            p.start()
        for p in ps:
            p.join()
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=20_000.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script, run = os.path.join(tmp, "writer.py"), os.path.join(tmp, "run")
        with open(script, "w") as f:
            f.write(WRITER)
        prog = subprocess.Popen([sys.executable, script, run, str(args.rate), str(args.seconds)])
        while not (os.path.isdir(run) and os.listdir(run)):
            time.sleep(0.05)
        top = subprocess.Popen([*FLOWMAP, "top", run, "--width", "120"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t_start = time.monotonic()
        prog.wait()
        ended = time.monotonic()
        top.wait(timeout=600)
        late = time.monotonic() - ended
        use = resource.getrusage(resource.RUSAGE_CHILDREN)
        report = subprocess.run([*FLOWMAP, "report", run, "--json"], capture_output=True, text=True)
        import json
        hops = sum(s["hops"] for s in json.loads(report.stdout)["seams"])
    print(f"hops written: {hops:,} ({hops / args.seconds:,.0f}/s over {args.seconds:.0f} s, "
          f"asked {2 * args.rate:,.0f}/s)")
    print(f"top exited {late:.2f} s after the program ended (target: within 3 s)")
    print(f"children's CPU (program and top together): {use.ru_utime + use.ru_stime:.1f} s over "
          f"{ended - t_start:.1f} s; largest child RSS {use.ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
