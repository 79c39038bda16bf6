"""The built-in trainer's ranks show their gradient traffic whichever way they sum it.

`train.grad_reduce=c10d` sums with `dist.all_reduce` (recorded by flowmap's Python
wrapper); `functional` with torch's functional collectives, issued from C++ as
compiled code issues them (seen only through the Flight Recorder). Both must give
each rank, on every step, one all-reduce of its gradients plus its four float64
metric sums: the model's parameter bytes (the `initial_weights` the driver hands
each rank) + 32 B.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict

import pytest

import flowmap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINER = os.path.join(ROOT, "examples", "grpo_tiny.py")
STEPS = 3
SUMS_BYTES = 4 * 8  # loss, entropy, clipped, ratio: float64 token sums

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(TRAINER), reason="needs the trainer")]


@pytest.mark.parametrize("how", ["c10d", "functional"])
def test_each_rank_all_reduces_its_gradients_once_per_step(tmp_path, how):
    run_dir = str(tmp_path / "run")
    r = subprocess.run([sys.executable, "-m", "flowmap", "trace", "-o", run_dir, TRAINER,
                        "--steps", str(STEPS), "--seed", "0", "--no-progress",
                        "--set", f"train.grad_reduce={how}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(run_dir)
    assert run.health.tracer_errors == 0, run.health.error_messages
    for rank in (0, 1):
        me = f"trainer/rank{rank}"
        params = run.seams[("driver", me, "initial_weights")].total_bytes
        per_step: dict = defaultdict(int)
        for h in run.hops:
            if (h.src, h.dst, h.name) == (me, "group[0,1]", "all_reduce"):
                per_step[h.step] += h.nbytes
        assert dict(per_step) == {s: params + SUMS_BYTES for s in range(STEPS)}, how
