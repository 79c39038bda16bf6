"""flowmap[ray]: a Ray job on a local, loopback-only cluster, traced from `flowmap trace`.

One job (one cluster start, the slow part) serves every test of this module:
a task makes prompts, two rollout actors generate from the same object ref,
a learner actor trains on both rollouts' refs and calls a function that only
a seam map instruments. The job never imports flowmap.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import textwrap

import pytest

import flowmap

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="Ray tests need ray: pip install -e '.[ray]'")

RAY_LIB = '''
def score(tokens):
    return float(tokens.mean())
'''

JOB = '''
import numpy as np
import ray

import ray_lib

ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
         log_to_driver=False)


@ray.remote
def make_prompts(n):
    return np.zeros((n, 16), dtype=np.int64)


@ray.remote
class Rollout:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def generate(self, prompts):
        n = prompts.shape[0]
        return {"tokens": self.rng.integers(0, 50, (n, 64)), "uid": [f"u{i}" for i in range(n)]}


@ray.remote
class Learner:
    def train(self, batch_a, batch_b, lr=0.1):
        return ray_lib.score(batch_a["tokens"]) + ray_lib.score(batch_b["tokens"])

    def count(self, refs):
        return len(refs)  # refs inside a list reach the actor as refs, unresolved


prompts = make_prompts.remote(8)
rollouts = [Rollout.remote(seed) for seed in range(2)]
learner = Learner.remote()
weights = ray.put(np.ones(1000, dtype=np.float32))
for step in range(2):
    a, b = [r.generate.remote(prompts) for r in rollouts]
    print("loss", ray.get(learner.train.remote(a, b, lr=0.5)))
assert ray.get(learner.count.remote([a, b])) == 2
ray.shutdown()
'''


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory):
    from flowmap_cli import run_cli

    tmp = tmp_path_factory.mktemp("ray")
    (tmp / "ray_lib.py").write_text(RAY_LIB)
    (tmp / "job.py").write_text(textwrap.dedent(JOB))
    (tmp / "seams.yaml").write_text("seams:\n  - {target: 'ray_lib:score', owner: reward}\n")
    # Ray's socket paths must stay under 107 bytes: pytest's tmp paths are too deep.
    ray_tmp = tempfile.mkdtemp(prefix="fmray", dir="/tmp")
    try:
        r = run_cli(["trace", "-o", str(tmp / "run"), "--seams", "seams.yaml", "job.py"],
                    cwd=tmp, timeout=300,
                    env={"RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(tmp),
                         "RAY_TMPDIR": ray_tmp})
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.count("loss") == 2
    return r, flowmap.load(str(tmp / "run"))


def pids_of(run, key):
    return {h.pid for h in run.hops if h.seam == key}


def test_every_process_of_the_job_lands_in_one_run(ray_run):
    r, run = ray_run
    assert "never appeared" not in r.stderr
    # driver + one task worker + three actor workers, and no empty shard of Ray's own services
    assert len(run.shards) == 5
    assert all(s.hops for s in run.shards)
    assert len({h.pid for h in run.hops}) == 5
    assert run.health.tracer_errors == 0 and run.health.bad_lines == 0


def test_owners_are_named_by_actor_class_and_task(ray_run):
    _, run = ray_run
    owners = set(run.owners)
    assert {"driver", "make_prompts", "Rollout/0", "Rollout/1", "Learner/0",
            "object_store", "reward"} <= owners
    # each actor's hops come from its own worker process
    assert pids_of(run, ("driver", "Rollout/0", "__init__")) != pids_of(
        run, ("driver", "Rollout/1", "__init__"))


def test_object_refs_between_actors_are_direct_hops_with_sizes(ray_run):
    _, run = ray_run
    # the rollouts' refs travel to the learner without the driver touching them
    for rollout in ("Rollout/0", "Rollout/1"):
        seam = run.seams[(rollout, "Learner/0", "train")]
        assert seam.hops == 2 and seam.transports == {"shm": 2}
        tokens = {leaf.path: leaf for leaf in seam.leaves}
        name = "batch_a.tokens" if rollout.endswith("0") else "batch_b.tokens"
        assert tokens[name].shape == (8, 64) and tokens[name].total_bytes == 2 * 8 * 64 * 8
    # the driver's own call carries only what it passed inline
    inline = run.seams[("driver", "Learner/0", "train")]
    assert inline.transports == {"rpc": 2} and inline.total_bytes == 2 * 8
    # one task's ref fanned out to both rollouts
    assert run.seams[("make_prompts", "Rollout/0", "generate")].total_bytes == 2 * 8 * 16 * 8
    assert run.seams[("make_prompts", "Rollout/1", "generate")].hops == 2
    # ray.put goes to the object store
    assert run.seams[("driver", "object_store", "put")].total_bytes == 4000


def test_a_reply_the_driver_fetches_is_an_rpc_of_the_result(ray_run):
    _, run = ray_run
    # `ray.get(learner.train.remote(...))`: the float reached the driver, recorded there
    back = run.seams[("Learner/0", "driver", "train")]
    assert back.hops == 2 and back.transports == {"rpc": 2}
    assert [(leaf.path, leaf.kind, leaf.total_bytes) for leaf in back.leaves] == [
        ("result", "float", 2 * 8)]
    driver_pid = pids_of(run, ("driver", "object_store", "put"))  # ray.put runs in the driver
    assert pids_of(run, ("Learner/0", "driver", "train")) == driver_pid != pids_of(
        run, ("Rollout/0", "Learner/0", "train"))


def test_a_ref_the_driver_only_passes_on_is_a_handle_not_the_payload(ray_run):
    _, run = ray_run
    # the rollouts' results (8x64 int64 tokens + uids, ~4.5 KiB) never reached the
    # driver: it held two refs per step and handed them to the learner
    for rollout in ("Rollout/0", "Rollout/1"):
        held = run.seams[(rollout, "driver", "generate")]
        assert held.hops == 2 and held.transports == {"ref": 2}
        [leaf] = held.leaves
        assert (leaf.path, leaf.dtypes) == ("result", ("ObjectRef",))
        assert held.total_bytes == 2 * 28 and held.moved_bytes_per_step == 0
    # one prompts ref, fanned out to both rollouts over two steps: one handle hop
    assert run.seams[("make_prompts", "driver", "make_prompts")].transports == {"ref": 1}
    # refs passed inside an argument are handles too, not the objects they point to
    sent = run.seams[("driver", "Learner/0", "count")]
    assert [leaf.dtypes for leaf in sent.leaves] == [("ObjectRef",)]
    assert sent.hops == 1 and sent.total_bytes == 2 * 28


def test_ray_workers_reaped_after_the_job_are_no_crash(ray_run, tmp_path):
    from flowmap_cli import run_cli

    _, run = ray_run
    r = run_cli(["report", run.path])
    assert r.returncode == 0, r.stderr
    assert "cut short" not in r.stdout and "health: ok" in r.stdout


def test_seam_maps_reach_the_workers(ray_run):
    _, run = ray_run
    learner_pid = pids_of(run, ("Rollout/0", "Learner/0", "train"))
    assert pids_of(run, ("Learner/0", "reward", "score")) == learner_pid
    assert run.seams[("Learner/0", "reward", "score")].hops == 4


def test_runtime_env_carries_tracing_and_keeps_the_users_settings(tmp_path, monkeypatch):
    from flowmap.capture.session import BOOT_DIR
    from flowmap.integrations.ray import runtime_env

    monkeypatch.setenv("FLOWMAP_SEAMS", "/maps/a.yaml")
    monkeypatch.setenv("FLOWMAP_AGGREGATE", "2")
    env = runtime_env(str(tmp_path), {"pip": ["x"], "env_vars": {"A": "1", "PYTHONPATH": "/u"}})
    assert env["pip"] == ["x"]
    v = env["env_vars"]
    assert v["A"] == "1" and v["FLOWMAP_RUN_DIR"] == str(tmp_path)
    assert v["FLOWMAP_SEAMS"] == "/maps/a.yaml" and v["FLOWMAP_AGGREGATE"] == "2"
    assert v["PYTHONPATH"].split(os.pathsep)[0] == BOOT_DIR
    assert v["PYTHONPATH"].split(os.pathsep)[-1] == "/u"
