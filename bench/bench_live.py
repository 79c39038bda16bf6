"""Watching a run: what `flowmap top` and `flowmap serve` cost, and what they cost the program.

Run: python bench/bench_live.py [--seconds 30] [--rounds 3]
The 10-minute figure of issue 28: python bench/bench_live.py --seconds 600

The program is issue 28's: 4 traced processes writing 10,000 hops/s together
(a step every 1,000 hops of a process). Three measures:

1. watched: the program runs `--seconds`, watched by `top` (on a
   pseudo-terminal) and `serve` (its page held open as the live page holds it:
   `data.json?after=VERSION`, and `/metrics` scraped every second, ten times as
   often as a 10 s scrape). Prints each watcher's share of one core (CPU time
   over wall time) and CPU time per hop line written, both for the whole run
   and per tenth of it, with RSS at each tenth (flat memory: the column does not
   grow); `--start-steps N` first has each process write N steps of 25 hops
   unpaced, so the measure starts where a long run is (1,500: the seams x steps
   the 10-minute run ends with);
2. latency: five hops on new seams, 1.7 s apart, written once the load ends
   (polling for them costs `serve` CPU, so not during the measure); the
   seconds until `/metrics` and the page's data show each; and the seconds
   from starting `top` to its first screen (interpreter start included);
3. interference, paired: the same paced program, unwatched and watched, in
   alternating rounds of `--fast-seconds` (load on a shared machine hits both
   alike): hops/s achieved and the writers' CPU time per hop, each the median
   of `--rounds`; both should be equal within noise. Then one process writing
   flat out (a core left for the watchers, on a 2-core machine), unwatched and
   watched, alternating: its hops/s.
"""

from __future__ import annotations

import argparse
import json
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
PROBES = 5  # latency probes, written after the measure (polling for them costs `serve` CPU)
FLOWMAP = [sys.executable, "-m", "flowmap"]

WRITER = r'''
import multiprocessing as mp, os, sys, time
import flowmap
PROBES = 5

def work(k, rate, seconds, start_steps, out):
    payload = {"tokens": b"x" * 512, "ids": list(range(16))}
    step = 0
    for step in range(1, start_steps + 1):  # a long run's seams x steps, written at once
        flowmap.step(step)
        for _ in range(25):
            flowmap.hop(f"rollout/{k}", "ready_buffer", payload, name="trajectory", step=step)
    out.put(None)
    n, t0, c0 = 0, time.monotonic(), time.process_time()
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
    out.put((n / (time.monotonic() - t0), (time.process_time() - c0) / max(n, 1)))

if __name__ == "__main__":
    run, rate, seconds, procs, start_steps = (sys.argv[1], float(sys.argv[2]), float(sys.argv[3]),
                                              int(sys.argv[4]), int(sys.argv[5]))
    probe = sys.argv[6] if len(sys.argv) > 6 else None
    with flowmap.tracing(run):
        q = mp.get_context("spawn").Queue()
        ps = [mp.get_context("spawn").Process(target=work, args=(k, rate, seconds, start_steps, q))
              for k in range(procs)]
        for p in ps: p.start()
        for _ in ps: q.get()
        if probe:
            open(probe + ".ready", "w").close()
        got = [q.get() for _ in ps]
        for p in ps: p.join()
        if probe:  # the latency probes: hops on new seams, at known times, 1.7 s apart
            for i in range(PROBES):
                with open(probe, "a") as f:
                    f.write(f"{i} {time.time()!r}\n")
                flowmap.hop("probe", "sink", b"p", name=f"probe{i}")
                time.sleep(1.7)
            time.sleep(4)
    print(sum(r for r, _ in got), sum(c for _, c in got) / len(got))
'''


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"VmRSS:\s+(\d+)", f.read())
    return int(m.group(1)) / 1024 if m else 0.0


def _get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def _hops_written(run: str) -> int:
    """Hop lines in the run's shards so far (a byte count would do; this is exact)."""
    n = 0
    for name in os.listdir(run):
        if name.endswith(".jsonl"):
            with open(os.path.join(run, name), "rb") as f:
                n += f.read().count(b'\n["h",')
    return n


class Watchers:
    """`top` on a pseudo-terminal and `serve` on a free port, both over `run`, with a page
    held open on `serve` and /metrics scraped every second."""

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
        self.pages = 0  # page data the open page received
        threading.Thread(target=self._page, daemon=True).start()
        threading.Thread(target=self._scrape, daemon=True).start()

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

    def _page(self) -> None:
        """What the live page does: ask for data newer than its own, at most 4 times a second."""
        version = 0
        while not self._stop.is_set():
            asked = time.monotonic()
            try:
                doc = json.loads(_get(f"{self.url}data.json?after={version}", timeout=30))
                version = doc.get("live", {}).get("version", version)
                self.pages += 1
            except (OSError, ValueError):
                pass
            self._stop.wait(max(0.0, 0.25 - (time.monotonic() - asked)))

    def _scrape(self) -> None:
        while not self._stop.wait(1.0):
            try:
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


def watched(seconds: float, start_steps: int, tmp: str) -> None:
    run = os.path.join(tmp, "paced")
    probe = os.path.join(tmp, "probe.txt")
    writer = subprocess.Popen([sys.executable, _writer(tmp), run, str(RATE_HOPS_S / PROCS),
                               str(seconds), str(PROCS), str(start_steps), probe],
                              stdout=subprocess.PIPE, text=True)
    while not os.path.exists(probe + ".ready"):
        if writer.poll() is not None:
            raise SystemExit("the writer ended before it started writing")
        time.sleep(0.05)
    w = Watchers(run)
    time.sleep(min(3.0, seconds / 5))  # start-up (imports, catching up, first screen) is not steady
    pids = w.pids()
    tenth = (seconds - min(3.0, seconds / 5) - 1.0) / 10  # the last second: the writers' end
    t0, hops0 = time.monotonic(), _hops_written(run)
    cpu0 = {k: _cpu_s(p) for k, p in pids.items()}
    rows = []
    t_prev, hops_prev, cpu_prev = t0, hops0, dict(cpu0)
    for i in range(10):
        while time.monotonic() < t0 + (i + 1) * tenth:
            time.sleep(0.2)
        t, hops = time.monotonic(), _hops_written(run)
        cpu = {k: _cpu_s(p) for k, p in pids.items()}
        rows.append((t - t0, {k: (cpu[k] - cpu_prev[k]) / (t - t_prev) for k in pids},
                     sum(cpu[k] - cpu_prev[k] for k in pids) / max(1, hops - hops_prev),
                     {k: _rss_mib(p) for k, p in pids.items()}))
        t_prev, hops_prev, cpu_prev = t, hops, cpu
    span, n = t_prev - t0, hops_prev - hops0
    share = {k: (cpu_prev[k] - cpu0[k]) / span for k in pids}
    latency = _latency(w, probe)
    out = writer.communicate()[0].strip().splitlines()
    pages = w.pages
    w.close()
    print(f"watched: {PROCS} processes, {float(out[-1].split()[0]) if out else 0:,.0f} hops/s "
          f"written together, {span:.0f} s measured"
          + (f", after {start_steps} steps per process written at once" if start_steps else ""))
    print("  at s    top %   serve %   both %   us/hop line   top RSS MiB   serve RSS MiB")
    for at, pct, per_hop, rss in rows:
        print(f"  {at:5.0f}   {100 * pct['top']:5.1f}   {100 * pct['serve']:7.1f}   "
              f"{100 * sum(pct.values()):6.1f}   {1e6 * per_hop:11.2f}   {rss['top']:11.1f}   "
              f"{rss['serve']:13.1f}")
    total = sum(share.values())
    print(f"  whole: top {100 * share['top']:.1f} %, serve {100 * share['serve']:.1f} %, both "
          f"{100 * total:.1f} % of a core; {1e6 * total * span / max(n, 1):.2f} us of CPU per hop "
          f"line ({n:,} lines); the page received {pages} updates")
    print(f"  top's first screen {w.first_screen_s:.2f} s after it started (interpreter start "
          "included)" if w.first_screen_s is not None else "  top drew no screen")
    for what, got in latency.items():
        print(f"  update latency, hop written -> {what} shows it: "
              + (f"median {statistics.median(got):.2f} s, largest {got[-1]:.2f} s of {len(got)}"
                 if got else "none shown")
              + (f" ({PROBES - len(got)} never shown)" if 0 < len(got) < PROBES else ""))


def _latency(w: Watchers, probe: str) -> dict[str, list[float]]:
    """Seconds from each probe hop's writing until /metrics and the page's data show it."""
    got: dict[str, dict[int, float]] = {"/metrics": {}, "the page's data": {}}
    deadline = time.monotonic() + 30 + 2 * PROBES
    while time.monotonic() < deadline and min(len(v) for v in got.values()) < PROBES:
        written = {}
        if os.path.exists(probe):
            with open(probe) as f:
                for line in f:
                    if line.endswith("\n"):
                        i, t = line.split()
                        written[int(i)] = float(t)
        for what, url, pattern in (("/metrics", "metrics", 'name="probe{}"'),
                                   ("the page's data", "data.json", '"probe{}"')):
            pending = [i for i in written if i not in got[what]]
            if pending:
                body = _get(w.url + url)
                for i in pending:
                    if pattern.format(i).encode() in body:
                        got[what][i] = time.time() - written[i]
        time.sleep(0.1)
    return {k: sorted(v.values()) for k, v in got.items()}


def _round(tmp: str, tag: str, rate: float, procs: int, seconds: float, watch: bool
           ) -> tuple[float, float]:
    run = os.path.join(tmp, tag)
    os.makedirs(run)
    w = Watchers(run) if watch else None
    out = subprocess.run([sys.executable, _writer(tmp), run, str(rate), str(seconds), str(procs),
                          "0"], capture_output=True, text=True, check=True).stdout
    if w is not None:
        w.close()
    shutil.rmtree(run)
    hops_s, cpu_per_hop = out.strip().splitlines()[-1].split()
    return float(hops_s), float(cpu_per_hop)


def interference(seconds: float, rounds: int, tmp: str) -> None:
    paced: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    flat: dict[bool, list[float]] = {False: [], True: []}
    for r in range(rounds):
        for watch in ((False, True) if r % 2 == 0 else (True, False)):
            paced[watch].append(_round(tmp, f"paced-{r}-{int(watch)}", RATE_HOPS_S / PROCS, PROCS,
                                       seconds, watch))
    for r in range(rounds):
        for watch in ((False, True) if r % 2 == 0 else (True, False)):
            flat[watch].append(_round(tmp, f"flat-{r}-{int(watch)}", 0, 1, seconds, watch)[0])
    med = {k: (statistics.median(h for h, _ in v), statistics.median(c for _, c in v))
           for k, v in paced.items()}
    print(f"interference, the program paced at {RATE_HOPS_S:,} hops/s ({PROCS} processes), "
          f"median of {rounds} paired rounds of {seconds:g} s:")
    for k, label in ((False, "unwatched"), (True, "watched  ")):
        print(f"  {label} {med[k][0]:9,.0f} hops/s   {1e6 * med[k][1]:.2f} us of CPU per hop "
              "(the writers')")
    print(f"  watched/unwatched: hops/s {med[True][0] / med[False][0]:.3f}, CPU per hop "
          f"{med[True][1] / med[False][1]:.3f}")
    plain, seen = statistics.median(flat[False]), statistics.median(flat[True])
    print(f"  one process flat out (a core left for the watchers on 2 cores): unwatched "
          f"{plain:,.0f} hops/s, watched {seen:,.0f} hops/s: ratio {seen / plain:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="the watched run's length")
    ap.add_argument("--start-steps", type=int, default=0,
                    help="steps each process writes at once first (1500: a 10-minute run's end)")
    ap.add_argument("--rounds", type=int, default=3, help="interference rounds (each mode)")
    ap.add_argument("--fast-seconds", type=float, default=5.0, help="one interference round")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="flowmap-bench-live-") as tmp:
        watched(args.seconds, args.start_steps, tmp)
        if args.rounds:
            interference(args.fast_seconds, args.rounds, tmp)


if __name__ == "__main__":
    main()
