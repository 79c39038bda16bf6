"""Public GRPO scripts nobody instrumented: `flowmap discover`, then `flowmap trace --seams`.

GIVEN a single-file GRPO trainer from a public repository (tests/integration/public_scripts/,
each with its licence and SOURCE.md; adapted only to run on CPU with a tiny random model and a
tokenizer and data made here),
WHEN discovery writes a seam map and the script is traced with it, unedited,
THEN the run has the script's real steps (its optimizer updates) and its flow shows the stages in
the order data moves through them, with the policy's, the reference's and the training log-probs
told apart.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flowmap.model.run import load
from flowmap.seams import load_seam_map

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

SCRIPTS = Path(__file__).resolve().parent / "public_scripts"


def _discover_and_trace(run_cli, tmp_path: Path, folder: str, script: str):
    work = tmp_path / folder
    if not work.exists():
        shutil.copytree(SCRIPTS / folder, work, ignore=shutil.ignore_patterns("__pycache__"))
    found = run_cli(["discover", "-o", "seams.yaml", str(work / script)], cwd=tmp_path,
                    timeout=600)
    assert found.returncode == 0, found.stderr[-3000:]
    seams = {s.target: s for s in load_seam_map(str(tmp_path / "seams.yaml")).seams}
    traced = run_cli(["trace", "-o", "run", "--seams", "seams.yaml", str(work / script)],
                     cwd=tmp_path, timeout=600)
    assert traced.returncode == 0, traced.stderr[-3000:]
    assert "never appeared" not in traced.stderr
    return found, seams, load(str(tmp_path / "run")).view


def _before(order: tuple[str, ...], *stages: str) -> bool:
    return all(order.index(a) < order.index(b) for a, b in zip(stages, stages[1:]))


@pytest.mark.slow
def test_tiny_grpo_fangyuan(tmp_path, run_cli):
    found, seams, view = _discover_and_trace(run_cli, tmp_path, "tiny_grpo_fangyuan", "train.py")
    # GIVEN grpo.py's functions, which train.py imports: each is targeted where it is defined
    assert {"grpo:generate_rollout_data", "grpo:compute_log_probs", "grpo:grpo_loss"} <= set(seams)
    # one log-prob function, called with the policy and the reference model, with and without
    # gradients: discovery asks for its calls to be told apart
    assert seams["grpo:compute_log_probs"].split_by == ("model", "grad")
    # 2 steps x mu=2 updates: four optimizer steps, found without flowmap.step
    assert "4 steps" in found.stderr
    assert view.steps == (0, 1, 2, 3)
    flow = view.flow
    order = flow.stages
    pairs = {(e.src, e.dst) for e in flow.edges}
    # rollout -> old log-probs (policy) -> reference log-probs -> loss, which computes the
    # training log-probs (with gradients) and hands its loss back to the driver
    assert order[0] == "rollout"
    assert _before(order, "rollout", "policy/model", "policy/ref_model", "loss")
    assert {("rollout", "policy/model"), ("rollout", "policy/ref_model"),
            ("policy/model", "loss"), ("policy/ref_model", "loss"),
            ("policy/model+grad", "loss"), ("loss", "main")} <= pairs
    assert view.draws_flow
    report = run_cli(["report", "run"], cwd=tmp_path)
    assert "flow: rollout → " in report.stdout.replace("\n", " ")
    doc = json.loads(run_cli(["report", "run", "--json"], cwd=tmp_path).stdout)
    assert doc["flow"]["stages"] == list(order) and doc["steps"] == 4


@pytest.mark.slow
def test_minimal_grpo_bharath2(tmp_path, run_cli):
    # the script reads grpo_config.yml and the model from the working directory, and its data
    # next to its datasets package: make_tiny writes them into the copy the test runs
    work = tmp_path / "minimal_grpo_bharath2"
    shutil.copytree(SCRIPTS / work.name, work, ignore=shutil.ignore_patterns("__pycache__"))
    made = subprocess.run([sys.executable, str(work / "make_tiny.py"), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    found, seams, view = _discover_and_trace(run_cli, tmp_path, "minimal_grpo_bharath2",
                                             "grpo_train.py")
    # the training loop is top-level script code; the seams are the model wrapper's methods
    # and the loss module, called on two instances (llm, llm_ref) told apart by `self`
    assert {"model:HuggingFaceLM.generate", "model:HuggingFaceLM.compute_log_probs",
            "grpo_loss:PolicyLoss.forward"} <= set(seams)
    assert seams["model:HuggingFaceLM.compute_log_probs"].split_by == ("self", "grad")
    assert seams["grpo_loss:PolicyLoss.forward"].owner == "loss"
    assert "4 steps" in found.stderr  # four prompts, an update after every two, one epoch
    assert len(view.steps) >= 4
    order = view.flow.stages
    pairs = {(e.src, e.dst) for e in view.flow.edges}
    # the DataLoader's workers hand over the prompts (the dataset stage), then generate -> the
    # driver's inline rewards and advantages -> old and reference log-probs -> training
    # log-probs -> the loss
    # the workers are named after the script's Dataset, never torch's `_worker_loop`
    assert not any(s.startswith("_worker_loop") for s in order), order
    assert [s for s in order if not s.startswith("GSM8KDataset/")][0] == "rollout", order
    assert all(order.index(s) < order.index("rollout") for s in order if s.startswith("GSM8KDataset/"))
    assert _before(order, "rollout", "policy/llm", "policy/llm_ref", "policy/llm+grad", "loss")
    assert {("rollout", "policy/llm"), ("rollout", "policy/llm_ref"),
            ("policy/llm", "loss"), ("policy/llm_ref", "loss"), ("policy/llm+grad", "loss"),
            ("main", "loss")} <= pairs
