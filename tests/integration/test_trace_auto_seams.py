"""`flowmap trace SCRIPT` alone tells the story of a script nobody instrumented.

GIVEN the two shapes of public RL script (examples/grpo_single_file.py: a single-file GRPO
trainer; examples/actor_critic.py: pytorch/examples' actor-critic, whose training step takes
no arguments and reads the policy's lists),
WHEN each runs under `flowmap trace` with no seam map, no edit and one run,
THEN the seams found in the first step are recorded for the rest of the run under the
script's own names, the stages come in the script's order, the learning stage is fed by
the policy through the loss's autograd graph, and the steps are the optimizer's updates.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flowmap.model.run import load
from flowmap.seams import load_seam_map

pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _copy(tmp_path: Path, name: str) -> Path:
    shutil.copy(EXAMPLES / name, tmp_path / name)
    return tmp_path / name


def _hops_into(shard: Path, owner: str) -> int:
    """Hops recorded so far into `owner` in a shard being written. A shard names each string
    once (`["s", id, text]`) and hops by id (`["h", t, src, dst, ...]`): counting the name's
    text would count 1 forever."""
    ids, hops = set(), 0
    for line in shard.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:  # the line being written
            continue
        if isinstance(rec, list) and rec[:1] == ["s"] and rec[2] == owner:
            ids.add(rec[1])
        elif isinstance(rec, list) and rec[:1] == ["h"] and rec[3] in ids:
            hops += 1
    return hops


def _before(order: tuple[str, ...], *stages: str) -> bool:
    return all(order.index(a) < order.index(b) for a, b in zip(stages, stages[1:]))


@pytest.mark.slow
def test_grpo_trainer_traced_alone(tmp_path, run_cli):
    script = _copy(tmp_path, "grpo_single_file.py")
    traced = run_cli(["trace", "-o", "run", str(script)], cwd=tmp_path, timeout=600)
    assert traced.returncode == 0, traced.stderr[-3000:]
    said = [ln for ln in traced.stderr.splitlines() if "no seam map given" in ln]
    assert len(said) == 1 and "until its first optimizer update" in said[0], traced.stderr
    # the map it made is in the run, loads, and names the script's own functions and classes
    seams = {s.target: s.owner for s in load_seam_map(str(tmp_path / "run" / "auto-seams.yaml")).seams}
    assert seams["__main__:ReplayBuffer.append"] == "ReplayBuffer.append"
    assert seams["__main__:zero_pad_sequences"] == "zero_pad_sequences"
    assert seams["__main__:GRPOLoss.forward"] == "GRPOLoss"
    view = load(str(tmp_path / "run")).view
    order = view.flow.stages
    assert _before(order, "rollout", "compute_rewards", "group_advantages",
                   "sequences_log_probs/model", "ReplayBuffer.append", "zero_pad_sequences",
                   "sequences_log_probs/model+grad", "GRPOLoss", "Adam.step")
    # join_experience_batch hands on zero_pad_sequences' tensors (sound identity: the
    # producer keeps them): an owner, not a stage of the flow
    assert "join_experience_batch" in {n.name for n in view.pipeline.nodes}
    assert not {"ready_buffer", "replay_buffer", "policy", "loss", "__main__"} & set(order)
    pairs = {(e.src, e.dst) for e in view.flow.edges}
    assert ("GRPOLoss", "Adam.step") in pairs  # loss.backward() in the driver: the optimizer learns
    # 12 optimizer updates are 12 steps, said with what counted them
    assert view.step_count == 12 and view.steps_from == "torch.optim.Adam.step"
    report = run_cli(["report", "run"], cwd=tmp_path, env={"COLUMNS": "80"})
    text = report.stdout
    assert "12 steps (torch.optim.Adam.step)" in text
    assert "(driver: main)" in text.replace("\n", " ")
    assert "no in-process refs" not in text and "items: 0 total" not in text
    doc = json.loads(run_cli(["report", "run", "--json"], cwd=tmp_path).stdout)
    assert doc["steps"] == 12


@pytest.mark.slow
def test_actor_critic_learning_step_fed_through_lists(tmp_path, run_cli):
    script = _copy(tmp_path, "actor_critic.py")
    traced = run_cli(["trace", "-o", "run", str(script)], cwd=tmp_path, timeout=600)
    assert traced.returncode == 0, traced.stderr[-3000:]
    view = load(str(tmp_path / "run")).view
    edges = {(e.src, e.dst): e for e in view.flow.edges}
    # finish_episode() takes no arguments: the policy's outputs reach it through
    # model.saved_actions, found by walking the loss's graph back to Policy's results
    fed = edges[("Policy", "finish_episode")]
    assert fed.hops == 11 and fed.nbytes > 0  # every update but the watched first
    assert _before(view.flow.stages, "Policy", "finish_episode")
    assert view.step_count == 12


@pytest.mark.slow
def test_no_auto_seams_records_nothing_and_says_how(tmp_path, run_cli):
    script = _copy(tmp_path, "actor_critic.py")
    traced = run_cli(["trace", "-o", "run", "--no-auto-seams", str(script), "--episodes", "2"],
                     cwd=tmp_path, timeout=600)
    assert traced.returncode == 0, traced.stderr[-3000:]
    assert "no seam map given" not in traced.stderr
    assert "no hops were recorded" in traced.stderr
    assert not (tmp_path / "run" / "auto-seams.yaml").exists()
    assert load(str(tmp_path / "run")).view.num_hops == 0


@pytest.mark.slow
def test_interrupted_run_keeps_its_story_and_a_clean_traceback(tmp_path):
    script = _copy(tmp_path, "actor_critic.py")
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowmap", "trace", "-o", "run", str(script), "--episodes", "0"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        shard_hops = 0
        while time.monotonic() < deadline and shard_hops < 3:  # past a few recorded updates
            time.sleep(0.5)
            shard_hops = sum(_hops_into(p, "finish_episode") for p in (tmp_path / "run").glob("*.jsonl"))
        assert shard_hops >= 3, "no update was recorded in 300 s"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert "KeyboardInterrupt" in err
    frames = re.findall(r'File "([^"]+)"', err)
    assert frames and not any(os.sep + "flowmap" + os.sep in f or os.sep + "cli" + os.sep in f
                              for f in frames), err
    assert frames[0] == str(script)  # the program's own frames stay: its top level first
    view = load(str(tmp_path / "run")).view
    assert ("Policy", "finish_episode") in {(e.src, e.dst) for e in view.flow.edges}
    assert view.step_count >= 3


LOADER_SCRIPT = '''
import torch
from torch.utils.data import DataLoader, Dataset


class Prompts(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((4,), float(i))


def rollout(model, batch):
    return model(batch)


def loss_fn(out):
    return out.pow(2).mean()


def main():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for batch in DataLoader(Prompts(), batch_size=2, num_workers=2):
        loss = loss_fn(rollout(model, batch))
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
'''


@pytest.mark.slow
def test_a_data_loaders_workers_do_not_stand_the_watch_down(tmp_path, run_cli):
    # GIVEN a trainer whose DataLoader has worker processes: their queue traffic is recorded
    # in the first step, and is not the program's own instrumentation
    script = tmp_path / "loader_train.py"
    script.write_text(LOADER_SCRIPT)
    traced = run_cli(["trace", "-o", "run", str(script)], cwd=tmp_path, timeout=600)
    assert traced.returncode == 0, traced.stderr[-3000:]
    said = [ln for ln in traced.stderr.splitlines() if "no seam map given" in ln]
    assert len(said) == 1 and "loss_fn" in said[0] and "rollout" in said[0], traced.stderr
    view = load(str(tmp_path / "run")).view
    assert _before(view.flow.stages, "rollout", "loss_fn")
    assert view.step_count == 4 and view.steps_from == "torch.optim.SGD.step"


INSTRUMENTED_SCRIPT = '''
import torch
import flowmap


def rollout(model, x):
    return model(x)


model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
warm = rollout(model, torch.randn(4, 8))  # set-up work the watch sees before the first step
for step in range(3):
    flowmap.step(step)  # before the step's first hop, as a framework's loop does
    out = rollout(model, torch.randn(4, 8))
    out.pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
    flowmap.hop("rollout", "learner", out.detach(), name="batch")
'''


@pytest.mark.slow
@pytest.mark.parametrize("where", ["script", "its_library"])
def test_an_instrumented_program_gets_no_seams_of_the_watchs_own(tmp_path, run_cli, where):
    # GIVEN a program that tells its own story (flowmap.step before its first hop, then
    # flowmap.hop), after set-up calls the watch would take for a seam: in the script itself
    # (not watched at all), or in a module the script imports (watched until that first call)
    script = tmp_path / "instrumented.py"
    if where == "script":
        script.write_text(INSTRUMENTED_SCRIPT)
    else:
        (tmp_path / "pipeline.py").write_text(INSTRUMENTED_SCRIPT.replace(
            "for step in range(3):", "def main():\n  for step in range(3):").replace(
            "\n    ", "\n      "))
        script.write_text("import pipeline\n\npipeline.main()\n")
    # WHEN it runs under `flowmap trace` with no map
    traced = run_cli(["trace", "-o", "run", str(script)], cwd=tmp_path, timeout=600)
    # THEN the watch stands down: no map is written and only the program's own seam is recorded
    assert traced.returncode == 0, traced.stderr[-3000:]
    assert "no seam map given" not in traced.stderr
    assert not (tmp_path / "run" / "auto-seams.yaml").exists()
    view = load(str(tmp_path / "run")).view
    assert {(src, dst) for src, dst, _ in view.seams} == {("rollout", "learner")}
    assert view.num_hops == 3


REPLAY_SCRIPT = '''
import random
import torch


class ReplayBuffer:
    def __init__(self):
        self.items = []

    def push(self, experiences):
        self.items.extend(experiences)

    def sample(self, count):
        return random.sample(self.items, count)


def rollout(model):
    return model(torch.randn(1, 8)).detach()


def objective(model, group):
    return torch.stack([model(x).sum() for x in group]).mean()


def main():
    random.seed(0)
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    buffer = ReplayBuffer()
    for step in range(3):
        buffer.push([rollout(model) for _ in range(6)])
        for update in range(5):  # five updates a rollout batch: more than a setup call waits
            loss = objective(model, buffer.sample(3))
            loss.backward()
            opt.step()
            opt.zero_grad()


if __name__ == "__main__":
    main()
'''


@pytest.mark.slow
def test_recording_opens_at_the_loops_first_function_past_many_updates(tmp_path, run_cli):
    # GIVEN nano-rl's shape: rollouts fill a replay buffer, then five updates sample it
    script = tmp_path / "replay_train.py"
    script.write_text(REPLAY_SCRIPT)
    # WHEN it runs under `flowmap trace` with no map
    traced = run_cli(["trace", "-o", "run", str(script)], cwd=tmp_path, timeout=600)
    assert traced.returncode == 0, traced.stderr[-3000:]
    said = [ln for ln in traced.stderr.splitlines() if "no seam map given" in ln]
    # THEN the recording waits for the next rollout (called six times in the watched step:
    # the loop's own), not for three updates, and the stages read in the script's order
    assert len(said) == 1 and "from the next rollout() on" in said[0], traced.stderr
    view = load(str(tmp_path / "run")).view
    assert view.seams and min(view.seams[s].hops for s in view.seams
                              if s[0] == "rollout") == 12  # steps 2 and 3, whole
    stages = [s for s in view.flow.stages if s != "main"]
    assert _before(tuple(stages), "rollout", "ReplayBuffer.push", "objective"), stages
    assert stages.index("rollout") == 0, stages
    # and the experiences made in the watched step, sampled later, are drawn from rollout,
    # which made them: `sample` only hands data on, and no edge starts at it
    assert not [e for e in view.flow.edges if e.src == "ReplayBuffer.sample"], view.flow.edges
    into_objective = {e.src: e.hops for e in view.flow.edges if e.dst == "objective"}
    assert into_objective == {"rollout": 10}, into_objective  # 2 x 5 updates, recorded
