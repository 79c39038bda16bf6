"""Instructions of `flowmap trace SCRIPT` (no seam map) over the plain run, counted by callgrind.

`bench_auto_seams.py` times the same pairs, but on a shared machine the plain run's own time
drifts by a third from one minute to the next, more than the overhead it measures. Counted
instructions do not drift: each script runs once plain and once traced, each under
`valgrind --tool=callgrind --trace-children=yes`, the whole process from interpreter start to
exit (imports, the watched first step, the recording, the run's files), and the ratio is
printed. Torch runs one thread in both (`OMP_NUM_THREADS=1`), so thread scheduling adds no
instructions of its own. Time is not instructions (a cache miss costs more than an add), so
this is the overhead's floor, and the wall-clock bench stays the target's measure.

Run: python bench/bench_auto_seams_instructions.py [--only actor_critic.py]
(needs valgrind; both runs together take 4-6 minutes a script, mostly torch's import)
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# name -> (path from the repo's root, arguments): our two shapes, and a public script of the
# second shape nobody here wrote (pytorch/examples' REINFORCE, as the integration tests run it)
SCRIPTS = {
    "grpo_single_file.py": ("examples/grpo_single_file.py", ["--steps", "40"]),
    "actor_critic.py": ("examples/actor_critic.py", ["--episodes", "40"]),
    "reinforce.py": ("tests/integration/public_scripts/pytorch_reinforce/reinforce.py",
                     ["--episodes", "40"]),
}


def instructions(cmd: list[str], tmp: str, tag: str) -> int:
    """Instructions of `cmd` and every process it starts."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = os.path.join(tmp, f"cg.{tag}")
    subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                    f"--callgrind-out-file={out}.%p", *cmd],
                   cwd=tmp, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    total = 0
    for part in glob.glob(out + ".*"):
        with open(part) as f:
            total += sum(int(line.split()[1]) for line in f if line.startswith("summary:"))
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=sorted(SCRIPTS), help="count this script alone")
    a = p.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed; this bench counts instructions with it")
    for name, (path, args) in SCRIPTS.items():
        if a.only is not None and name != a.only:
            continue
        script = os.path.join(ROOT, path)
        with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
            plain = pool.submit(instructions, [sys.executable, script, *args], tmp, "plain")
            traced = pool.submit(instructions, [sys.executable, "-m", "flowmap", "trace", "-o",
                                                os.path.join(tmp, "run"), script, *args], tmp, "traced")
            p_n, t_n = plain.result(), traced.result()
        print(f"{name} {' '.join(args)}: plain {p_n / 1e9:.3f} G instructions, traced "
              f"{t_n / 1e9:.3f} G; traced / plain {t_n / p_n:.3f}x")


if __name__ == "__main__":
    main()
