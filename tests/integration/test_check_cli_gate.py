"""flowmap gates itself: the built-in trainer against the project's own baseline (slow).

Each test traces the real asynchronous trainer (about 20 s a run on two
cores), so they are marked `slow`; runs start together to share the wait.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINER = os.path.join(ROOT, "examples", "grpo_tiny.py")
BASELINE = os.path.join(ROOT, "ci", "flowmap-baseline.json")
BUDGET = os.path.join(ROOT, "ci", "flowmap-budget.yaml")
GATE = os.path.join(ROOT, "scripts", "gate.sh")
# Must match TRAINER_ARGS in scripts/gate.sh, or the comparison is not like for like.
GATE_ARGS = ["--steps", "4", "--seed", "0", "--no-progress"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(TRAINER), reason="needs examples/grpo_tiny.py"),
]


def _trace(run_dir, *extra) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "flowmap", "trace", "-o", str(run_dir), TRAINER, *GATE_ARGS, *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )


def _gate(env_extra, *args) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, **env_extra}
    return subprocess.run(["bash", GATE, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def staleness_runs(tmp_path_factory):
    """Starts two traces (--max-staleness 0 and 2) in the background; call it to wait for them."""
    d = tmp_path_factory.mktemp("staleness")
    procs = {k: _trace(d / f"staleness{k}", "--max-staleness", str(k)) for k in (0, 2)}

    def wait() -> dict[int, str]:
        for p in procs.values():
            _, err = p.communicate(timeout=600)
            assert p.returncode == 0, err
        return {k: str(d / f"staleness{k}") for k in procs}

    yield wait
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait()


def _delta_bytes(row: str) -> float:
    """The delta cell of a diff row ('+573 B', '-2.00 KiB', '0 B') in bytes."""
    from flowmap.units import parse_bytes

    number, unit = row.split()[-3:-1]
    return float(parse_bytes(f"{number.lstrip('+-')} {unit}"))


def test_gate_fails_when_the_trainers_batch_grows(tmp_path, staleness_runs):
    # (staleness_runs: requested here only so its traces run alongside this test's)
    # GIVEN the committed baseline (or, before it is recorded, one recorded here by the gate)
    env = {"FLOWMAP_GATE_RUN": str(tmp_path / "gate")}
    if not os.path.exists(BASELINE):
        env["FLOWMAP_GATE_BASELINE"] = str(tmp_path / "baseline.json")
        recorded = _gate(env, "--record")
        assert recorded.returncode == 0, recorded.stderr
    # WHEN the trainer assembles batches of 8 env groups instead of 4
    grown = _gate({**env, "FLOWMAP_GATE_TRAINER_ARGS": "--groups-per-batch 8"})
    # THEN the gate fails, naming the batch seams and their grown leaves
    assert grown.returncode == 1, grown.stdout + grown.stderr
    assert "FAIL    batcher -> trainer/rank0 : micro_batch" in grown.stdout
    assert "FAIL    batcher -> reward : rollout_batch" in grown.stdout
    assert "- micro_batch.input_ids [" in grown.stdout
    assert grown.stdout.splitlines()[-1].startswith("flowmap check FAILED: ")


def test_diff_between_two_staleness_settings(staleness_runs):
    runs = staleness_runs()
    out = subprocess.run(
        [sys.executable, "-m", "flowmap", "diff", runs[0], runs[2]],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[3].split() == ["seam", "A/step", "B/step", "delta", "ratio"]
    rows = [x for x in lines[4:] if x and not x.startswith("    ")]
    seams = {" ".join(r.split()[:5]) for r in rows}
    assert {"ready_buffer -> batcher : samples", "batcher -> reward : rollout_batch",
            "weight_sync -> rollout/0 : weights"} <= seams
    # sorted by absolute change; weights do not depend on staleness
    deltas = [_delta_bytes(r) for r in rows]
    assert deltas == sorted(deltas, reverse=True)
    weights = next(r for r in rows if r.startswith("weight_sync -> rollout/0 : weights"))
    assert weights.split()[-1] == "1.00x"


def test_committed_budget_parses():
    from flowmap.check.budget_file import read

    budget = read(BUDGET)
    assert budget.seams and budget.counters and budget.total
