"""`flowmap discover` on a Ray job: the seams run only in Ray's worker processes.

A local, loopback-only cluster; the task and the actor live in a module the
workers import. Workers are ended by Ray at shutdown, so what they saw reaches
the discovery dir through the periodic rewrite of each process's record.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import textwrap

import pytest

from flowmap.discover.naming import RAY

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason="Ray tests need ray: pip install -e '.[ray]'"),
]

RAY_LIB = """
import numpy as np
import ray


@ray.remote
def make_prompts(n):
    return np.zeros((n, 16), dtype=np.int64)


@ray.remote
class Learner:
    def train(self, batch):
        return float(batch["tokens"].mean())
"""

JOB = """
import numpy as np
import ray

import ray_disc_lib

ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
learner = ray_disc_lib.Learner.remote()
for step in range(2):
    prompts = ray.get(ray_disc_lib.make_prompts.remote(8))
    print("loss", ray.get(learner.train.remote({"tokens": np.ones((8, 64), dtype=np.int64)})))
ray.shutdown()
"""


def test_ray_workers_discover_and_the_map_merges_them(tmp_path, run_cli):
    (tmp_path / "ray_disc_lib.py").write_text(textwrap.dedent(RAY_LIB))
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    ray_tmp = tempfile.mkdtemp(prefix="fmray", dir="/tmp")  # socket paths stay short
    try:
        r = run_cli(["discover", "--seconds", "600", "-o", "seams.yaml", "job.py"], cwd=tmp_path,
                    timeout=400, env={"RAY_USAGE_STATS_ENABLED": "0", "RAY_TMPDIR": ray_tmp,
                                      "PYTHONPATH": str(tmp_path)})
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.count("loss") == 2
    # THEN the task, which ran only in a worker, is found with the bytes each call returned
    # (8x16 int64), and listed as what a seam map must not patch (flowmap's Ray integration
    # records Ray calls); so is the actor method where its thread was watched (on Python
    # 3.11 Ray may run actor calls on a thread Python's profile hook never reaches)
    assert "no candidate can be a seam-map target" in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("not a target: ray_disc_lib:")]
    assert "not a target: ray_disc_lib:make_prompts (2 calls, 1.00 KiB/call): " + RAY in lines
    assert set(lines) <= {
        "not a target: ray_disc_lib:make_prompts (2 calls, 1.00 KiB/call): " + RAY,
        "not a target: ray_disc_lib:Learner.train (2 calls, 4.00 KiB/call): " + RAY,
    }
