"""Watching a run: what `flowmap top` and `flowmap serve` cost, and what they cost the program.

Run: python bench/bench_live.py [--seconds 30] [--rounds 3]

Three measures, as issue 28 bounds them:

1. paced: 4 traced processes write 10,000 hops/s together for `--seconds`,
   watched by `top` (on a pseudo-terminal, redrawing) and `serve` (its page
   data and /metrics fetched every second, as an open page and a 10 s scrape
   would, only more often). Prints each watcher's share of one core and its
   RSS at the start and end of the second half (flat memory: the two agree);
2. latency: a hop on a new seam, written while watched; the seconds until
   `/metrics` shows it; and the seconds from starting `top` to its first screen;
3. throughput: the same 4 processes writing as fast as they can for a few
   seconds, watched and unwatched, rounds alternating (paired, so load on a
   shared machine hits both alike). Prints hops/s of each and their ratio.

The lead re-measures on a quiet machine for the 10-minute figure; a short
run shows the trend.
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

PROCS = 4
RATE_HOPS_S = 10_000
FLOWMAP = [sys.executable, "-m", "flowmap"]

WRITER = r'''
import multiprocessing as mp, os, sys, time
import flowmap

def work(k, rate, seconds, out):
    payload = {"tokens": b"x" * 512, "ids": list(range(16))}
    n, t0 = 0, time.monotonic()
    step = 0
    while True:
        now = time.monotonic() - t0
        if now >= seconds:
            break
        if rate:
            due = int(now * rate) + 1
            if n >= due:
                time.sleep(0.002)
                continue
        if n % 1000 == 0:
            step += 1
            flowmap.step(step)
        flowmap.hop(f"rollout/{k}", "ready_buffer", payload, name="trajectory", step=step)
        n += 1
    out.put(n / (time.monotonic() - t0))

if __name__ == "__main__":
    run, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    with flowmap.tracing(run):
        q = mp.get_context("spawn").Queue()
        ps = [mp.get_context("spawn").Process(target=work, args=(k, rate, seconds, q))
              for k in range(int(sys.argv[4]))]
        for p in ps: p.start()
        rates = [q.get() for _ in ps]
        for p in ps: p.join()
        if len(sys.argv) > 5:  # the latency probe: one hop on a new seam, at a known time
            with open(sys.argv[5], "w") as f:
                f.write(repr(time.time()))
            flowmap.hop("probe", "sink", b"p", name="probe")
            time.sleep(5)
    print(sum(rates))
'''


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"VmRSS:\s+(\d+)", f.read())
    return int(m.group(1)) / 1024 if m else 0.0


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


class Watchers:
    """`top` on a pseudo-terminal and `serve` on a free port, both over `run`."""

    def __init__(self, run: str) -> None:
        master, slave = pty.openpty()
        self.started = time.monotonic()
        self.first_screen_s: float | None = None  # from start to top's first screen
        self.top = subprocess.Popen([*FLOWMAP, "top", run], stdin=slave, stdout=slave,
                                    stderr=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "140",
                                                                    "LINES": "45"})
        os.close(slave)
        self._master = master
        threading.Thread(target=self._drain, daemon=True).start()
        self.serve = subprocess.Popen([*FLOWMAP, "serve", run, "--port", "0"],
                                      stderr=subprocess.PIPE, text=True)
        line = self.serve.stderr.readline() if self.serve.stderr else ""
        found = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
        if not found:
            raise SystemExit(f"serve did not start: {line}")
        self.url = found.group(1)
        self._stop = threading.Event()
        threading.Thread(target=self._browse, daemon=True).start()

    def _drain(self) -> None:
        seen = b""
        try:
            while True:
                chunk = os.read(self._master, 65536)
                if not chunk:
                    return
                if self.first_screen_s is None:
                    seen = (seen + chunk)[-4096:]
                    if b"processes traced" in seen:
                        self.first_screen_s = time.monotonic() - self.started
        except OSError:
            pass

    def _browse(self) -> None:
        while not self._stop.wait(1.0):
            try:
                _get(self.url + "data.json")
                _get(self.url + "metrics")
            except OSError:
                pass

    def pids(self) -> dict[str, int]:
        return {"top": self.top.pid, "serve": self.serve.pid}

    def close(self) -> None:
        self._stop.set()
        for p in (self.top, self.serve):
            p.terminate()
            p.wait(timeout=10)
        os.close(self._master)


def _writer(tmp: str) -> str:
    """The writer program as a file (multiprocessing's spawn re-imports it by path)."""
    path = os.path.join(tmp, "live_writer.py")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(WRITER)
    return path


def paced(seconds: float, tmp: str) -> None:
    run = os.path.join(tmp, "paced")
    probe = os.path.join(tmp, "probe.txt")
    writer = subprocess.Popen([sys.executable, _writer(tmp), run, str(RATE_HOPS_S / PROCS),
                               str(seconds), str(PROCS), probe], stdout=subprocess.PIPE, text=True)
    while not os.path.isdir(run):
        time.sleep(0.05)
    w = Watchers(run)
    time.sleep(2.0)  # start-up (imports, first screen) is not the steady state
    start = {k: _cpu_s(p) for k, p in w.pids().items()}
    t0 = time.monotonic()
    rss: dict[str, list[float]] = {k: [] for k in start}
    while writer.poll() is None and not os.path.exists(probe):
        for k, p in w.pids().items():
            rss[k].append(_rss_mib(p))
        time.sleep(1.0)
    span = time.monotonic() - t0
    cpu = {k: (_cpu_s(p) - start[k]) / span for k, p in w.pids().items()}
    # latency: the probe hop is written right after `probe` appears
    latency = None
    if os.path.exists(probe):
        while os.path.getsize(probe) == 0:
            time.sleep(0.01)
        with open(probe) as f:
            written = float(f.read())
        while time.time() - written < 10:
            if b'name="probe"' in _get(w.url + "metrics"):
                latency = time.time() - written
                break
            time.sleep(0.05)
    out = writer.communicate()[0].strip()
    w.close()
    print(f"paced: {PROCS} processes, {out.splitlines()[-1] if out else '?'} hops/s written "
          f"together, {span:.0f} s watched")
    for k in ("top", "serve"):
        half = rss[k][len(rss[k]) // 2:] or [0.0]
        print(f"  {k:6s} CPU {100 * cpu[k]:5.1f} % of a core   RSS {half[0]:6.1f} -> {half[-1]:6.1f} MiB "
              f"(second half)   peak {max(rss[k] or [0.0]):6.1f} MiB")
    print(f"  both   CPU {100 * sum(cpu.values()):5.1f} % of a core")
    print(f"  top's first screen {w.first_screen_s:.2f} s after it started (interpreter start "
          "included)" if w.first_screen_s is not None else "  top drew no screen")
    print(f"  update latency (hop written -> /metrics shows it): "
          f"{'over 10 s' if latency is None else f'{latency:.2f} s'}")


def throughput(seconds: float, rounds: int, tmp: str) -> None:
    got: dict[bool, list[float]] = {False: [], True: []}
    for r in range(rounds):
        for watched in ((False, True) if r % 2 == 0 else (True, False)):
            run = os.path.join(tmp, f"fast-{r}-{int(watched)}")
            os.makedirs(run)
            w = Watchers(run) if watched else None
            out = subprocess.run([sys.executable, _writer(tmp), run, "0", str(seconds),
                                  str(PROCS)], capture_output=True, text=True, check=True).stdout
            if w is not None:
                w.close()
            got[watched].append(float(out.strip().splitlines()[-1]))
            shutil.rmtree(run)
    plain, watched_ = statistics.median(got[False]), statistics.median(got[True])
    print(f"throughput: unwatched {plain:,.0f} hops/s, watched {watched_:,.0f} hops/s "
          f"(median of {rounds}, paired rounds): ratio {watched_ / plain:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="paced phase length")
    ap.add_argument("--rounds", type=int, default=3, help="throughput rounds (each mode)")
    ap.add_argument("--fast-seconds", type=float, default=4.0, help="one throughput round")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="flowmap-bench-live-") as tmp:
        paced(args.seconds, tmp)
        throughput(args.fast_seconds, args.rounds, tmp)


if __name__ == "__main__":
    main()
