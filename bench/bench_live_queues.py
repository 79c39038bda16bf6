"""Watching a queue-based run: what `top` and `serve` hold and cost when every hop is two halves.

Run: python bench/bench_live_queues.py [--seconds 120] [--rate 1000]

`bench_live.py` writes hops a process records whole. A queue's hop is written
as two halves, the producer's and the consumer's, that only the run can join
(`flowmap.read.halves`); a watch settles the oldest of them as the run goes
(`flowmap.read.settle`). The program: 2 producer processes, each putting
`--rate` payloads a second into a `multiprocessing.Queue` of its own (a step
every 200), and 2 consumers taking them, traced whole by `flowmap.tracing`;
watched by `top` and `serve` as in `bench_live.py`. Prints each watcher's share
of one core and its RSS per tenth of the run (flat memory: the column does not
grow), and at the end that `flowmap report`'s per-seam hops equal the page's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench_live import FLOWMAP, Watchers, _cpu_s, _get, _rss_mib

PROCS = 2  # producers, and as many consumers

WRITER = r'''
import multiprocessing as mp, sys, time
import flowmap

def produce(q, rate, seconds, ready):
    payload = {"tokens": b"x" * 512, "ids": list(range(16))}
    ready.put(None)
    n, step, t0 = 0, 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        if n >= int((time.monotonic() - t0) * rate) + 1:
            time.sleep(0.002)
            continue
        if n % 200 == 0:
            step += 1
            flowmap.step(step)
        q.put(payload)
        n += 1
    q.put(None)

def consume(q):
    while q.get() is not None:
        pass

if __name__ == "__main__":
    run, rate, seconds, procs = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    ctx = mp.get_context("spawn")
    with flowmap.tracing(run):
        ready = ctx.Queue()
        qs = [ctx.Queue(maxsize=1000) for _ in range(procs)]
        ps = [ctx.Process(target=produce, args=(q, rate, seconds, ready)) for q in qs]
        ps += [ctx.Process(target=consume, args=(q,)) for q in qs]
        for p in ps: p.start()
        for _ in range(procs): ready.get()
        print("ready", flush=True)
        for p in ps: p.join()
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="the watched run's length")
    ap.add_argument("--rate", type=float, default=1000.0, help="puts a second, per producer")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="flowmap-bench-queues-") as tmp:
        path = os.path.join(tmp, "queue_writer.py")
        with open(path, "w") as f:
            f.write(WRITER)
        run = os.path.join(tmp, "run")
        writer = subprocess.Popen([sys.executable, path, run, str(args.rate), str(args.seconds),
                                   str(PROCS)], stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None
        if writer.stdout.readline().strip() != "ready":
            raise SystemExit("the writer ended before it started writing")
        w = Watchers(run)
        settle_s = min(3.0, args.seconds / 5)
        time.sleep(settle_s)
        pids = w.pids()
        tenth = (args.seconds - settle_s - 1.0) / 10
        t0 = time.monotonic()
        cpu0 = {k: _cpu_s(p) for k, p in pids.items()}
        print(f"watched: {PROCS} producers x {args.rate:,.0f} puts/s into queues, {PROCS} "
              "consumers; two halves a hop")
        print("  at s    top %   serve %   top RSS MiB   serve RSS MiB")
        t_prev, cpu_prev = t0, dict(cpu0)
        for i in range(10):
            while time.monotonic() < t0 + (i + 1) * tenth:
                time.sleep(0.2)
            t = time.monotonic()
            cpu = {k: _cpu_s(p) for k, p in pids.items()}
            pct = {k: 100 * (cpu[k] - cpu_prev[k]) / (t - t_prev) for k in pids}
            print(f"  {t - t0:5.0f}   {pct['top']:5.1f}   {pct['serve']:7.1f}   "
                  f"{_rss_mib(pids['top']):11.1f}   {_rss_mib(pids['serve']):13.1f}")
            t_prev, cpu_prev = t, cpu
        share = {k: 100 * (cpu_prev[k] - cpu0[k]) / (t_prev - t0) for k in pids}
        writer.wait()
        ended = time.monotonic()
        page = json.loads(_get(w.url + "data.json"))
        while page.get("live", {}).get("state") == "running" and time.monotonic() < ended + 60:
            time.sleep(0.2)  # the page's last update: once the program's end is read
            page = json.loads(_get(w.url + "data.json"))
        caught_up = time.monotonic() - ended
        w.close()
        report = json.loads(subprocess.run([*FLOWMAP, "report", run, "--json"], check=True,
                                           capture_output=True, text=True).stdout)
        print(f"  whole: top {share['top']:.1f} %, serve {share['serve']:.1f} % of a core; the "
              f"page showed the program's end {caught_up:.1f} s after it ended")
        got, want = _hops(page), _hops(report)
        print(f"  hops per seam, the live page's last data vs `flowmap report`: "
              f"{'equal' if got == want else 'DIFFERENT'}: {got}"
              + ("" if got == want else f" vs {want}"))


def _hops(doc: dict) -> dict[str, int]:
    """Each seam's hops in a report document, or in the page's data (owners by id there)."""
    name = {o["id"]: o["name"] for o in doc.get("owners", [])
            if isinstance(o, dict) and "id" in o}
    return {f"{name.get(s['src'], s['src'])}->{name.get(s['dst'], s['dst'])}:{s['name']}":
            s["hops"] for s in doc.get("seams", [])}


if __name__ == "__main__":
    main()
