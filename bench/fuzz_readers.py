"""Long fuzz run of the readers: N corrupt-shard mutants x every reader verb, in process.

Prints the tracebacks that escaped (grouped by their last line), the hangs (a
verb past --timeout seconds), the exit codes seen and the peak RSS. The short,
bounded version runs in CI: tests/unit/test_fuzz_readers.py.

Run: python bench/fuzz_readers.py [--mutants 10000] [--seed 11] [--timeout 20]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from fuzz_shards import make_run, mutate, run_verbs, shard_of  # noqa: E402


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mutants", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--timeout", type=int, default=20)
    ap.add_argument("--verbs", default=None, help="comma-separated subset of verbs")
    ap.add_argument("--good", default=None, help="an existing run to mutate (default: make one)")
    args = ap.parse_args()
    only = args.verbs.split(",") if args.verbs else None
    rng = random.Random(args.seed)
    tmp = tempfile.mkdtemp(prefix="flowmap-fuzz-")
    from flowmap.cli.main import main as cli

    good = args.good or make_run(os.path.join(tmp, "good"))
    baseline = os.path.join(tmp, "base.json")
    assert cli(["baseline", good, "-o", baseline]) == 0
    data = open(shard_of(good), "rb").read()
    signal.signal(signal.SIGALRM, _alarm)
    tracebacks: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    hangs: list[str] = []
    codes: collections.Counter[tuple[str, int | None]] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    t0 = time.perf_counter()
    runs = 0
    for n in range(args.mutants):
        mutant = mutate(data, rng)
        kinds[mutant.how] += 1
        d = os.path.join(tmp, "m")
        run = os.path.join(d, "run")
        os.makedirs(run)
        with open(os.path.join(run, "host-1-abcd.flowmap.jsonl"), "wb") as f:
            f.write(mutant.shard)
        signal.alarm(args.timeout)
        try:
            outcomes = run_verbs(run, d, baseline, only)
        except Hang:
            hangs.append(mutant.how)
            outcomes = []
        finally:
            signal.alarm(0)
        for o in outcomes:
            runs += 1
            codes[(o.verb, o.code)] += 1
            if o.traceback:
                key = f"{o.verb}: {o.traceback.strip().splitlines()[-1][:200]}"
                tracebacks[key] += 1
                examples.setdefault(key, f"[{mutant.how}]\n{o.traceback}")
        shutil.rmtree(d, ignore_errors=True)
        if (n + 1) % 500 == 0:
            print(f"  {n + 1} mutants, {sum(tracebacks.values())} tracebacks, {len(hangs)} hangs, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n{args.mutants} mutants x {runs // max(1, args.mutants)} verbs = {runs} verb runs "
          f"in {time.perf_counter() - t0:.0f} s")
    print("mutations:", dict(sorted(kinds.items())))
    print("exit codes:", {f"{v}={c}": k for (v, c), k in sorted(codes.items(), key=str)})
    print(f"tracebacks: {sum(tracebacks.values())}")
    for key, count in tracebacks.most_common():
        print(f"  {count:6d}  {key}\n{examples[key]}")
    print(f"hangs (> {args.timeout} s): {len(hangs)} {collections.Counter(hangs)}")
    print(f"peak RSS: {peak_mib:.0f} MiB")
    sys.exit(1 if tracebacks or hangs else 0)


if __name__ == "__main__":
    main()
