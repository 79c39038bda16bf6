"""Ctrl-C, as a user presses it, in `flowmap trace SCRIPT` with no seam map.

GIVEN a script nobody instrumented, traced alone,
WHEN SIGINT reaches the whole process group (the terminal sends it to the program and to its
DataLoader's workers alike), while the first step is still being watched or later,
THEN the run ends with "interrupted" and exit status 130, and `flowmap report` and
`flowmap render --html` still tell what ran: the stages, in the script's order, and the steps
made so far.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flowmap.model.run import load

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

WAITS_IN_ITS_FIRST_STEP = '''
import time

import torch


def rollout(model, x):
    return model(x)


def loss_fn(out):
    return out.pow(2).mean()


def main():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1000):
        loss = loss_fn(rollout(model, torch.randn(2, 4)))
        if step == 0:
            print("first step", flush=True)
            time.sleep(120)  # Ctrl-C lands here: before the first update, still watched
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
'''


def _trace(tmp_path: Path, script: Path, *args: str) -> subprocess.Popen[str]:
    """`flowmap trace` in a process group of its own, as a shell starts a job."""
    return subprocess.Popen(
        [sys.executable, "-m", "flowmap", "trace", "-o", "run", str(script), *args],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        process_group=0, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _ctrl_c(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGINT to the job's whole process group, as the terminal sends it."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        return proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()


def _updates(run: Path) -> int:
    """Optimizer updates recorded so far: the steps the shards have reached."""
    steps = 0
    for shard in run.glob("*.jsonl"):
        for line in shard.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, list) and rec[:1] == ["p"] and len(rec) > 2 and isinstance(rec[2], int):
                steps = max(steps, rec[2])  # ["p", t_us, step]: the step changed
    return steps


@pytest.mark.slow
def test_ctrl_c_while_the_first_step_is_watched(tmp_path, run_cli):
    script = tmp_path / "waits.py"
    script.write_text(WAITS_IN_ITS_FIRST_STEP)
    proc = _trace(tmp_path, script)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "first step"  # the watch is on: no update yet
    time.sleep(0.5)
    out, err = _ctrl_c(proc)
    assert proc.returncode == 130, err[-3000:]
    assert "flowmap: interrupted (Ctrl-C)" in err
    said = [ln for ln in err.splitlines() if "no seam map given" in ln]
    assert len(said) == 1 and "until it was interrupted, before its first optimizer update" in said[0], err
    assert "rollout" in said[0] and "loss_fn" in said[0]
    # the report says what happened and what the watch found, not an empty run's hint alone
    report = run_cli(["report", "run"], cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    text = " ".join(report.stdout.split())
    assert "interrupted" in text
    assert "rollout → loss_fn" in text, text
    html = run_cli(["render", "run", "run.html", "--html"], cwd=tmp_path)
    assert html.returncode == 0, html.stderr
    assert "interrupted" in (tmp_path / "run.html").read_text()


@pytest.mark.slow
def test_ctrl_c_to_the_group_mid_run_keeps_the_story(tmp_path, run_cli):
    # a loop fed by a DataLoader's two workers: the terminal's SIGINT reaches them too
    script = ROOT / "tests" / "browser" / "scripts" / "grpo_dataloader.py"
    proc = _trace(tmp_path, script, "--steps", "0")
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and _updates(tmp_path / "run") < 4 and proc.poll() is None:
            time.sleep(0.5)
        assert _updates(tmp_path / "run") >= 4, "no update was recorded in 300 s"
        assert proc.poll() is None, "the program ended before Ctrl-C reached it"
    finally:
        out, err = _ctrl_c(proc)
    assert proc.returncode == 130, err[-3000:]
    assert "KeyboardInterrupt" in err and "Traceback" in err
    assert "flowmap: interrupted (Ctrl-C); the run keeps everything recorded until then" in err
    view = load(str(tmp_path / "run")).view
    assert "interrupted" in view.ending.sentence
    assert view.step_count >= 4 and view.steps_from == "torch.optim.AdamW.step"
    order = view.flow.stages
    assert not any(s.startswith("_worker_loop") for s in order), order
    path = ["Prompts/0", "TinyLM.generate", "TinyLM.compute_log_probs", "PolicyLoss"]
    assert [order.index(s) for s in path] == sorted(order.index(s) for s in path), order
    report = run_cli(["report", "run"], cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert f"{view.step_count} steps (torch.optim.AdamW.step)" in report.stdout
    assert "interrupted" in report.stdout
    html = run_cli(["render", "run", "run.html", "--html"], cwd=tmp_path)
    assert html.returncode == 0, html.stderr
