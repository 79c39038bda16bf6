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
import yaml

import flowmap

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


def test_ray_targets_are_discovered_and_the_map_records_them(tmp_path, run_cli):
    (tmp_path / "ray_disc_lib.py").write_text(textwrap.dedent(RAY_LIB))
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    ray_tmp = tempfile.mkdtemp(prefix="fmray", dir="/tmp")  # socket paths stay short
    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_TMPDIR": ray_tmp, "PYTHONPATH": str(tmp_path)}
    try:
        r = run_cli(["discover", "--seconds", "600", "-o", "seams.yaml", "job.py"], cwd=tmp_path,
                    timeout=400, env=env)
        assert r.returncode == 0, r.stderr[-4000:]
        assert r.stdout.count("loss") == 2
        # THEN the task, which ran only in a worker, is a target of the written map, marked as
        # recorded by the Ray integration (the actor method too where its thread was watched:
        # on Python 3.11 Ray may run actor calls on a thread the profile hook never reaches)
        seam_map = yaml.safe_load((tmp_path / "seams.yaml").read_text())
        by_target = {s["target"]: s for s in seam_map["seams"]}
        assert "ray_disc_lib:make_prompts" in by_target, r.stderr[-4000:]
        assert set(by_target) <= {"ray_disc_lib:make_prompts", "ray_disc_lib:Learner.train"}
        text = (tmp_path / "seams.yaml").read_text()
        assert text.count("a Ray task or actor method") == len(by_target)
        # AND used with `flowmap trace --seams` (owners renamed as a user would), the job still
        # runs (`.remote` unbroken) and its Ray calls are recorded under the map's words
        by_target["ray_disc_lib:make_prompts"].update(owner="prompts", result_name="prompt_ids")
        train = {"target": "ray_disc_lib:Learner.train", "owner": "learner", "name": "batch",
                 "result_name": "loss"}
        seam_map["seams"] = [s for s in seam_map["seams"] if s["target"] != train["target"]]
        seam_map["seams"].append(train)
        (tmp_path / "seams.yaml").write_text(yaml.safe_dump(seam_map))
        r = run_cli(["trace", "-o", str(tmp_path / "run"), "--seams", "seams.yaml", "job.py"],
                    cwd=tmp_path, timeout=400, env=env)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.count("loss") == 2
    assert "never appeared" not in r.stderr and "could not" not in r.stderr
    run = flowmap.load(str(tmp_path / "run"))
    # the task is given an int only: discovery saw no payload going in, and its map says
    # `call: false`, which the Ray integration honours as a wrapper would
    assert by_target["ray_disc_lib:make_prompts"].get("call") is False
    assert not [k for k in run.seams if k[:2] == ("driver", "prompts")]
    result = run.seams[("prompts", "driver", "prompt_ids")]
    assert result.hops == 2 and result.total_bytes == 2 * 8 * 16 * 8
    assert run.seams[("driver", "learner/0", "batch")].total_bytes == 2 * 8 * 64 * 8
    assert run.seams[("learner/0", "driver", "loss")].hops == 2
    assert not {"make_prompts", "Learner/0"} & set(run.owners)
