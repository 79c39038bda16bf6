"""A real two-node Ray cluster on one machine: owners placed on their nodes, bytes named by
what moved them, the driver's funnel found.

The head and a second node are started with `ray start` in a network namespace
that has only loopback (Ray otherwise rewrites 127.0.0.1 to the machine's
address), inside a pid namespace of their own, so the cluster's processes end
with the namespace and nothing else on the machine is touched (no `ray stop`).
Needs root (`ip netns`, `unshare`); skips with the reason otherwise. One job, 5
steps: per step one ObjectRef handed from a rollout on the second node to the
trainer on the head, one batch fetched by the driver and passed to the trainer,
and one 768 KiB value the driver fetches (over Ray's inline limit).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import flowmap
from flowmap.findings import findings
from flowmap.reporters.terminal import report_lines

STEPS = 5

JOB = '''
import os, ray, torch
STEPS = int(os.environ["FM_STEPS"])
ray.init(address=os.environ["FM_RAY_ADDRESS"], log_to_driver=False)


@ray.remote(num_cpus=0)
class Rollout:
    def generate(self, step):
        return {"obs": torch.full((64, 128), float(step)), "mask": torch.ones(64, 128, dtype=torch.bool)}

    def rollout(self, step):
        return torch.full((64, 1024), float(step))  # 256 KiB, handed on by ref

    def big(self, step):
        return torch.zeros(192, 1024)  # 768 KiB: through the object store, not inline


@ray.remote(num_cpus=0)
class Trainer:
    def train(self, batch, lr):
        return float(batch["obs"].sum())

    def absorb(self, traj):
        return float(traj.sum())


far = Rollout.options(resources={"wnode": 1}).remote()   # on the second node
near = Rollout.options(resources={"hnode": 1}).remote()  # on the head, with the driver
trainer = Trainer.options(resources={"hnode": 1}).remote()
for step in range(STEPS):
    ray.get(trainer.absorb.remote(far.rollout.remote(step)))  # one ObjectRef handed on
    batch = ray.get(near.generate.remote(step))               # one batch through the driver
    ray.get(trainer.train.remote(batch, lr=0.1))
    ray.get(near.big.remote(step))
assert len({n["NodeID"] for n in ray.nodes() if n["Alive"]}) == 2
ray.shutdown()
'''

CLUSTER = '''
set -e
ip link set lo up
ray_cli() { "$PY" -c 'import sys; from ray.scripts.scripts import main; sys.argv[0] = "ray"; main()' "$@"; }
export RAY_USAGE_STATS_ENABLED=0
ray_cli start --head --node-ip-address=127.0.0.1 --port=6391 --num-cpus=1 \\
    --resources='{"hnode": 8}' --include-dashboard=false --temp-dir="$TMPD" >/dev/null
ray_cli start --address=127.0.0.1:6391 --node-ip-address=127.0.0.1 --num-cpus=1 \\
    --resources='{"wnode": 8}' --temp-dir="$TMPD" >/dev/null
FM_RAY_ADDRESS=127.0.0.1:6391 "$PY" -m flowmap trace -o "$RUN" job.py
'''


def _why_not() -> str | None:
    if importlib.util.find_spec("ray") is None:
        return "Ray tests need ray: pip install -e '.[ray]'"
    if os.geteuid() != 0:
        return "a network namespace needs root"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "needs ip(8) and unshare(1)"
    return None


@pytest.fixture(scope="module")
def two_node_run(tmp_path_factory):
    why = _why_not()
    if why:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("ray2")
    (tmp / "job.py").write_text(JOB)
    (tmp / "cluster.sh").write_text(CLUSTER)
    ns = f"flowmap{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace here ({made.stderr.strip()[:200]})")
    ray_tmp = tempfile.mkdtemp(prefix="fmr", dir="/tmp")  # short: Ray's socket paths live here
    run = str(tmp / "run")
    try:
        r = subprocess.run(
            ["ip", "netns", "exec", ns, "unshare", "--pid", "--fork", "--mount-proc",
             "bash", "cluster.sh"],
            cwd=tmp, capture_output=True, text=True, timeout=300,
            # HOME of its own: a token another Ray job left in ~/.ray/auth_token would make
            # the second node's `ray start` present it to a head that never asked for one
            env={**os.environ, "PY": sys.executable, "TMPD": ray_tmp, "RUN": run,
                 "FM_STEPS": str(STEPS), "HOME": ray_tmp})
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    if r.returncode != 0 and "unshare" in r.stderr and not os.path.isdir(run):
        pytest.skip(f"cannot make a pid namespace here ({r.stderr.strip()[-200:]})")
    assert r.returncode == 0, r.stderr[-3000:]
    return flowmap.load(run).view


def test_each_owner_is_placed_in_its_own_process_on_its_own_node(two_node_run):
    view = two_node_run
    procs = view.health.processes
    assert len({p.ray_node for p in procs if p.ray_node}) == 2
    where = {o: p for p in procs for o in p.owners}
    assert set(where) == {"driver", "Rollout/0", "Rollout/1", "Trainer/0"}
    for name, o in view.owners.items():
        assert o.pids == (where[name].pid,), name  # not the recorder's (the driver's) pid
    assert where["Rollout/0"].ray_node != where["driver"].ray_node
    assert where["Rollout/1"].ray_node == where["Trainer/0"].ray_node == where["driver"].ray_node
    text = "\n".join(line for line, _ in report_lines(view, 200))
    assert "Ray nodes" in text


def test_transports_are_named_by_what_moved_the_bytes(two_node_run):
    seams = two_node_run.seams_by_label
    ref = seams["Rollout/0 -> Trainer/0 : absorb"]
    assert (dict(ref.transports), ref.total_bytes) == ({"net": STEPS}, STEPS * 64 * 1024 * 4)
    batch = seams["Rollout/1 -> driver : generate"]  # 40 KiB: inline in the reply
    assert (dict(batch.transports), batch.total_bytes) == ({"rpc": STEPS}, STEPS * 64 * 128 * 5)
    big = seams["Rollout/1 -> driver : big"]  # over the inline limit: the node's object store
    assert (dict(big.transports), big.total_bytes) == ({"shm": STEPS}, STEPS * 192 * 1024 * 4)
    assert not [f for f in findings(two_node_run) if f.kind == "serialisation"]


def test_the_batch_through_the_driver_is_a_pass_through_naming_it(two_node_run):
    found = [f for f in findings(two_node_run) if f.kind == "pass_through"]
    assert [f.seams for f in found] == [["Rollout/1 -> driver : generate",
                                         "driver -> Trainer/0 : train"]]
    assert "through driver" in found[0].message
    doc = json.loads(json.dumps([f.as_dict() for f in found]))
    assert doc[0]["bytes_per_step"] > 0
