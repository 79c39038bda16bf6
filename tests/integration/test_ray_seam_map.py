"""A seam map naming Ray tasks and actor methods: the same keys a Python target honours.

One Ray job on a local, loopback-only cluster, traced with a seam map; the job
never imports flowmap. A task makes batches (called with an argument the map
leaves out), an actor trains on them, once passed inline and once by ref, and
evaluates them, and a task of the script counts their tokens. The map's `args`, `dims`, `items`, `also` and `result: false`
shape what is recorded, as for a wrapped Python function; `split_by` and
`transport`, which cannot apply to a Ray call, are named in one warning each.
Every figure below is computed by hand from the arrays the job builds.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import textwrap

import pytest

import flowmap

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="Ray tests need ray: pip install -e '.[ray]'")

RAY_LIB = '''
import numpy as np
import ray


@ray.remote
def make_batch(n, tag, pad):
    return {"tokens": np.zeros((n, 16), dtype=np.int64), "uid": [f"{tag}{i}" for i in range(n)]}


@ray.remote
class Learner:
    def train(self, batch, lr, notes):
        return {"loss": np.full(3, lr, dtype=np.float32), "seen": len(batch["uid"])}

    def evaluate(self, batch):
        return float(batch["tokens"].sum())
'''

JOB = '''
import numpy as np
import ray

import ray_map_lib

ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
PAD = np.ones(250, dtype=np.float32)     # 1000 B that `args` leaves out of the task's call
NOTES = np.ones(500, dtype=np.float64)   # 4000 B that `args` leaves out of the method's call
learner = ray_map_lib.Learner.remote()


@ray.remote
def total(batch, scale):  # a task of the script itself: Ray ships it to its worker by value
    return int(batch["tokens"].sum()) * scale


for step in range(2):
    batch = ray.get(ray_map_lib.make_batch.remote(8, f"s{step}-", PAD))  # resolved by the driver
    print("loss", ray.get(learner.train.remote(batch, 0.5, NOTES))["loss"][0])  # passed inline
    ref = ray_map_lib.make_batch.remote(4, f"r{step}-", PAD)  # handed on unresolved: by ref
    print("loss", ray.get(learner.train.remote(ref, 0.25, NOTES))["loss"][0])
    ray.get(learner.evaluate.remote(batch))
    ray.get(total.remote(batch, 3))
ray.shutdown()
'''

SEAMS = '''
seams:
  - target: ray_map_lib:make_batch
    owner: prompts
    args: [n, tag]
    name: request
    result_name: batch
    items: result.uid
    dims: {result.tokens: [batch, tokens]}
  - target: ray_map_lib:Learner.train
    owner: learner
    args: [batch]
    name: batch
    result_name: loss
    items: batch.uid
    dims: {batch.tokens: [batch, tokens], result.loss: [metric]}
    also: [{payload: result.loss, src: learner, dst: logger, name: loss_log}]
    split_by: [batch]
  - target: ray_map_lib:Learner.evaluate
    owner: learner
    name: eval
    result: false
    transport: shm
  - target: __main__:total
    owner: counter
    args: [batch]
    name: tokens
    dims: {batch.tokens: [batch, tokens]}
    result: false
'''


@pytest.fixture(scope="module")
def mapped_run(tmp_path_factory):
    from flowmap_cli import run_cli

    tmp = tmp_path_factory.mktemp("ray_map")
    (tmp / "ray_map_lib.py").write_text(textwrap.dedent(RAY_LIB))
    (tmp / "job.py").write_text(textwrap.dedent(JOB))
    (tmp / "seams.yaml").write_text(textwrap.dedent(SEAMS))
    ray_tmp = tempfile.mkdtemp(prefix="fmray", dir="/tmp")  # Ray's socket paths stay short
    try:
        r = run_cli(["trace", "-o", str(tmp / "run"), "--seams", "seams.yaml", "job.py"],
                    cwd=tmp, timeout=300,
                    env={"RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(tmp),
                         "RAY_TMPDIR": ray_tmp})
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.count("loss") == 4
    run = flowmap.load(str(tmp / "run"))
    assert run.health.tracer_errors == 0, run.health.error_messages
    return r, run


def leaves(seam):
    return {leaf.path: (leaf.total_bytes, leaf.dims) for leaf in seam.leaves}


def items(run, key, transport):
    return [h.items for h in run.hops if h.seam == key and h.transport == transport]


def test_args_select_the_payload_of_a_task_and_of_an_actor_method(mapped_run):
    _, run = mapped_run
    # the task's call carries n (an int, 8 B) and tag (`s0-`, 3 B), never the 1000 B pad
    request = run.seams[("driver", "prompts", "request")]
    assert request.hops == 4
    assert leaves(request) == {"n": (4 * 8, None), "tag": (4 * 3, None)}
    # the method's call carries the batch only, never lr or the 4000 B of notes: inline, the
    # whole batch (8x16 int64 tokens and 8 uids of 4 B) on two calls; a batch passed by ref
    # reaches the learner from its producer, and the driver's call hop carries nothing
    inline = run.seams[("driver", "learner/0", "batch")]
    assert sorted(h.nbytes for h in run.hops if h.seam == inline.key) == [
        0, 0, 8 * 16 * 8 + 8 * 4, 8 * 16 * 8 + 8 * 4]
    assert set(leaves(inline)) == {"batch.tokens", "batch.uid[*]"}
    by_ref = run.seams[("prompts", "learner/0", "batch")]
    assert by_ref.transports == {"shm": 2}
    assert [h.nbytes for h in run.hops if h.seam == by_ref.key] == [4 * 16 * 8 + 4 * 4] * 2
    # an entry without `args` sends every argument, as a wrapped function does
    assert leaves(run.seams[("driver", "learner/0", "eval")]) == {
        "batch.tokens": (2 * 8 * 16 * 8, None), "batch.uid[*]": (2 * 8 * 4, None)}


def test_a_task_of_the_script_is_recorded_as_its_entry_says(mapped_run):
    _, run = mapped_run
    # its worker never imports a module the map names, and knows the entry all the same
    counted = run.seams[("driver", "counter", "tokens")]
    assert counted.hops == 2 and leaves(counted) == {
        "batch.tokens": (2 * 8 * 16 * 8, ("batch", "tokens")), "batch.uid[*]": (2 * 8 * 4, None)}
    assert not [k for k in run.seams if k[0] == "counter"]


def test_dims_name_the_leaves_on_the_call_and_on_the_result(mapped_run):
    _, run = mapped_run
    assert leaves(run.seams[("driver", "learner/0", "batch")])["batch.tokens"] == (
        2 * 8 * 16 * 8, ("batch", "tokens"))
    assert leaves(run.seams[("prompts", "learner/0", "batch")])["batch.tokens"] == (
        2 * 4 * 16 * 8, ("batch", "tokens"))
    # the result, recorded where the driver resolves its ref
    assert leaves(run.seams[("prompts", "driver", "batch")])["result.tokens"] == (
        2 * 8 * 16 * 8, ("batch", "tokens"))
    assert leaves(run.seams[("learner/0", "driver", "loss")])["result.loss"] == (
        4 * 3 * 4, ("metric",))


def test_items_ride_on_the_hop_that_carries_them(mapped_run):
    _, run = mapped_run
    batches = [tuple(f"s{step}-{i}" for i in range(8)) for step in range(2)]
    # the task's result, resolved by the driver; the refs it handed on are handles, no items
    assert items(run, ("prompts", "driver", "batch"), "rpc") == batches
    assert items(run, ("prompts", "driver", "batch"), "ref") == [(), ()]
    # the method's call: inline from the driver, or by ref from the task that made them
    assert [i for i in items(run, ("driver", "learner/0", "batch"), "rpc") if i] == batches
    assert items(run, ("prompts", "learner/0", "batch"), "shm") == [
        tuple(f"r{step}-{i}" for i in range(4)) for step in range(2)]


def test_also_and_result_false_apply_as_for_a_python_target(mapped_run):
    _, run = mapped_run
    logged = run.seams[("learner", "logger", "loss_log")]
    assert logged.hops == 4 and leaves(logged) == {"loss": (4 * 3 * 4, None)}
    assert run.seams[("driver", "learner/0", "eval")].hops == 2
    assert not [k for k in run.seams if k[0] == "learner/0" and k[2] == "eval"]


def test_keys_a_ray_call_cannot_honour_are_named_once(mapped_run):
    r, run = mapped_run
    lines = [line for line in r.stderr.splitlines() if "does not apply" in line]
    assert lines == [
        "flowmap: warning: seam-map target ray_map_lib:Learner.train is a Ray task or actor "
        "method, so its `split_by` does not apply: its arguments reach the worker as fresh "
        "copies at every call, so their identity cannot tell calls apart (each actor is "
        "already an instance of its own).",
        "flowmap: warning: seam-map target ray_map_lib:Learner.evaluate is a Ray task or actor "
        "method, so its `transport` does not apply: a Ray call's transport is how its bytes "
        "moved: `rpc` inline, `shm` by ref, `ref` for a handle passed on.",
    ]
    assert "Traceback" not in r.stderr
    # split_by left the actor one instance: no `learner/0/<label>` owner
    assert {o for o in run.owners if o.startswith("learner")} == {"learner", "learner/0"}
