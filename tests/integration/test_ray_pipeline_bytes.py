"""Issue 41's judged Ray pipeline, on the merged tree (sound identity + Ray lineage).

Rollout actors and a trainer; per step one ObjectRef handed from a rollout to
the trainer, and one batch the driver fetches with `ray.get` and passes to the
trainer. 30 steps, traced with `flowmap trace`. Every edge the pictures draw
(the flow's where it is drawn, else the seams) carries the true bytes, counted
here from the tensor sizes; the driver's funnel is a pass-through finding that
names the driver. The ref's batch is small (13 KiB), the funnel's over Ray's
inline limit (385 KiB), so both ways values travel are counted. The control job
only hands the ObjectRef on: no finding.
Three Ray jobs in all (they are slow): the pipeline, a pure driver funnel and a
control, the last two of 5 steps.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile

import pytest

import flowmap
from flowmap.findings import findings
from flowmap.reporters.html_data import html_document

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="Ray tests need ray: pip install -e '.[ray]'")

STEPS = 30
COLS, MASK = 384, (8, 128)  # obs: float32 [rows, COLS]; mask: bool
SMALL, LARGE = 8, 256  # rows: the ref's batch is small, the funnel's over Ray's 100 KiB inline limit
REF = 28  # a pickled ObjectRef, as the driver holds it


def batch_bytes(rows):
    return rows * COLS * 4 + MASK[0] * MASK[1]


BATCH, FUNNEL = batch_bytes(SMALL), batch_bytes(LARGE)  # 13,312 B and 394,240 B

JOB = f'''
import os, ray, torch
COLS, MASK, SMALL, LARGE = {COLS}, {MASK}, {SMALL}, {LARGE}
STEPS = int(os.environ["FM_STEPS"])
MODE = os.environ["FM_MODE"]
ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)


@ray.remote(num_cpus=0)
class Rollout:
    def generate(self, step, rows):
        return {{"obs": torch.full((rows, COLS), float(step)),
                "mask": torch.ones(MASK, dtype=torch.bool)}}


@ray.remote(num_cpus=0)
class Trainer:
    def train(self, batch):
        return float(batch["obs"].sum())

    def learn(self, batch):
        return float(batch["obs"].sum())


a, b = Rollout.remote(), Rollout.remote()
trainer = Trainer.remote()
for step in range(STEPS):
    out = [] if MODE == "pure" else [trainer.train.remote(a.generate.remote(step, SMALL))]  # a ref
    if MODE != "ref":  # a batch the driver fetches and passes on
        out.append(trainer.learn.remote(ray.get(b.generate.remote(step, LARGE))))
    assert len(ray.get(out)) == len(out)
ray.shutdown()
'''


def trace(tmp, mode, steps):
    from flowmap_cli import run_cli

    (tmp / "job.py").write_text(JOB)
    ray_tmp = tempfile.mkdtemp(prefix="fmray", dir="/tmp")  # Ray's socket paths stay short
    try:
        r = run_cli(["trace", "-o", str(tmp / "run"), "job.py"], cwd=tmp, timeout=300,
                    env={"RAY_USAGE_STATS_ENABLED": "0", "RAY_TMPDIR": ray_tmp,
                         "FM_STEPS": str(steps), "FM_MODE": mode})
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-4000:]
    rep = run_cli(["report", "--json", str(tmp / "run")])
    assert rep.returncode == 0, rep.stderr
    return flowmap.load(str(tmp / "run")), json.loads(rep.stdout)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    return trace(tmp_path_factory.mktemp("pipe"), "funnel", STEPS)


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    return trace(tmp_path_factory.mktemp("ctrl"), "ref", 5)


@pytest.fixture(scope="module")
def pure(tmp_path_factory):
    return trace(tmp_path_factory.mktemp("pure"), "pure", 5)


def drawn_edges(doc):
    """(src, dst) -> bytes of every edge the pictures draw: the flow's, else the seams'."""
    if "flow" in doc:
        return {(e["src"], e["dst"]): e["bytes"] for e in doc["flow"]["edges"]}
    out: dict[tuple[str, str], int] = {}
    for s in doc["seams"]:
        out[(s["src"], s["dst"])] = out.get((s["src"], s["dst"]), 0) + s["total_bytes"]
    return out


def test_every_edge_carries_the_true_bytes(pipeline):
    run, doc = pipeline
    edges = drawn_edges(doc)
    true = {("Rollout/0", "Trainer/0"): STEPS * BATCH,   # the ref's object, fetched by the trainer
            ("Rollout/1", "driver"): STEPS * FUNNEL,     # ray.get in the driver
            ("driver", "Trainer/0"): STEPS * FUNNEL,     # the fetched batch passed on
            ("Rollout/0", "driver"): STEPS * REF}        # the handle only
    for edge, nbytes in true.items():
        assert edges.get(edge, 0) == pytest.approx(nbytes, rel=0.01), (edge, edges)
    # no edge carries a batch from a stage that did not produce it
    assert ("Rollout/1", "Trainer/0") not in edges
    assert ("Rollout/0", "Rollout/1") not in edges and ("Rollout/1", "Rollout/0") not in edges
    assert ("Trainer/0", "driver") in edges and edges[("Trainer/0", "driver")] < STEPS * 2 * 16
    # the model's flow agrees with what the JSON draws, and orders stages by the data's path
    flow = {(e.src, e.dst): e.nbytes for e in run.view.flow.edges}
    for edge, nbytes in true.items():
        assert flow[edge] == pytest.approx(nbytes, rel=0.01), (edge, flow)
    order = run.view.flow.stages
    assert order.index("Rollout/1") < order.index("driver") < order.index("Trainer/0")
    assert order.index("Rollout/0") < order.index("Trainer/0")


def test_the_seam_table_figures(pipeline):
    run, _ = pipeline
    for key, rows in ((("Rollout/0", "Trainer/0", "train"), SMALL),
                      (("Rollout/1", "driver", "generate"), LARGE),
                      (("driver", "Trainer/0", "learn"), LARGE)):
        seam = run.seams[key]
        assert (seam.hops, seam.total_bytes) == (STEPS, STEPS * batch_bytes(rows)), key
        assert {leaf.shape for leaf in seam.leaves if leaf.dtype == "float32"} == {(rows, COLS)}
    # the ref's object and the large batch moved through the object store
    assert run.seams[("Rollout/0", "Trainer/0", "train")].transports == {"shm": STEPS}
    assert run.seams[("driver", "Trainer/0", "learn")].transports == {"shm": STEPS}
    # the page draws the seam table's figures
    page = {s["label"]: s["total_bytes"] for s in html_document(run.view)["seams"]}
    assert page == {st.label: st.total_bytes for st in run.seams.values()}
    held = run.seams[("Rollout/0", "driver", "generate")]
    assert held.transports == {"ref": STEPS} and held.moved_bytes_per_step == 0


def test_the_driver_funnel_is_a_pass_through_naming_the_driver(pipeline):
    run, doc = pipeline
    found = [f for f in doc["findings"] if f["kind"] == "pass_through"]
    assert len(found) == 1, found
    [f] = found
    assert "driver" in f["message"] and "Rollout/1" in f["message"] and "Trainer/0" in f["message"]
    assert f["seams"] == ["Rollout/1 -> driver : generate", "driver -> Trainer/0 : learn"]
    # the job marks no steps: every "per step" figure is then the run's total (docs/report-json.md)
    assert doc["steps"] == 0
    assert f["bytes_per_step"] == pytest.approx(STEPS * FUNNEL, rel=0.01)
    # the ref hand-off is no pass-through: nothing names Rollout/0's path through the driver
    assert not any("Rollout/0" in s for f in findings(run.view) for s in f.seams
                   if f.kind == "pass_through")


def test_a_driver_that_hands_the_ref_on_is_no_finding(control):
    run, doc = control
    assert run.seams[("Rollout/0", "Trainer/0", "train")].total_bytes == 5 * BATCH
    assert run.seams[("Rollout/0", "driver", "generate")].transports == {"ref": 5}
    assert not [f for f in doc["findings"] if f["kind"] == "pass_through"], doc["findings"]


def test_a_pure_driver_funnel_is_a_pass_through_naming_the_driver(pure):
    run, doc = pure
    assert drawn_edges(doc)[("Rollout/1", "driver")] == 5 * FUNNEL
    assert drawn_edges(doc)[("driver", "Trainer/0")] == 5 * FUNNEL
    [f] = [f for f in doc["findings"] if f["kind"] == "pass_through"]
    assert f["seams"] == ["Rollout/1 -> driver : generate", "driver -> Trainer/0 : learn"]
    assert "passes through driver" in f["message"]
    assert f["bytes_per_step"] == pytest.approx(5 * FUNNEL, rel=0.01)
