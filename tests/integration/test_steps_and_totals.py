"""Real steps where the program has them, and "totals" in every output where it has none.

GIVEN a script that never calls `flowmap.step`, traced through a seam map,
WHEN it updates a torch optimizer, THEN each update ends a step: its hops carry the step;
WHEN it has no optimizer and sets no step, THEN report, DOT, HTML, export --steps, baseline and
discover all say its figures are totals, none says "per step".
"""

from __future__ import annotations

import json
import textwrap

import pytest

import flowmap

pytest.importorskip("torch")

TRAIN = '''
import torch


def rollout(prompts):
    return prompts.float() * 2


def loss_of(model, batch):
    return model(batch).pow(2).mean()


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for it in range(3):
        batch = rollout(torch.randint(0, 9, (8, 4)))
        loss = loss_of(model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
'''

NO_OPTIMIZER = '''
import torch


def rollout(prompts):
    return prompts.float() * 2


def score(batch):
    return batch.sum(dim=1)


def main():
    for it in range(3):
        score(rollout(torch.randint(0, 9, (8, 4))))


if __name__ == "__main__":
    main()
'''

MAP = '''
seams:
  - target: "__main__:rollout"
    owner: rollout
  - target: "__main__:SCORE"
    owner: reward
'''


def _trace(tmp_path, run_cli, script: str, second: str) -> str:
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    (tmp_path / "seams.yaml").write_text(textwrap.dedent(MAP.replace("SCORE", second)))
    r = run_cli(["trace", "-o", "run", "--seams", "seams.yaml", "train.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return str(tmp_path / "run")


def test_each_optimizer_update_ends_a_step(tmp_path, run_cli):
    run = flowmap.load(_trace(tmp_path, run_cli, TRAIN, "loss_of"))
    # three iterations, each ended by opt.step(): the work before the first update is step 0
    assert run.steps == [0, 1, 2]
    rollouts = [h.step for h in run.hops if h.dst == "rollout"]
    assert rollouts == [0, 1, 2]
    r = run_cli(["report", "run"], cwd=tmp_path)
    assert "3 steps" in r.stdout and "/step" in r.stdout


def test_a_program_without_steps_says_totals_everywhere(tmp_path, run_cli):
    _trace(tmp_path, run_cli, NO_OPTIMIZER, "score")
    report = run_cli(["report", "run"], cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "no steps (figures are run totals)" in report.stdout
    assert "/step" not in report.stdout and "1 step" not in report.stdout
    doc = run_cli(["report", "run", "--json"], cwd=tmp_path)
    assert json.loads(doc.stdout)["steps"] == 0
    dot = run_cli(["render", "run", "--dot", "g.dot"], cwd=tmp_path)
    assert dot.returncode == 0, dot.stderr
    text = (tmp_path / "g.dot").read_text()
    assert "no steps (figures are run totals)" in text and "/step" not in text
    html = run_cli(["render", "run", "--html", "g.html"], cwd=tmp_path)
    assert html.returncode == 0, html.stderr
    page = (tmp_path / "g.html").read_text()
    assert '"steps":0' in page.replace(" ", "")
    export = run_cli(["export", "run", "--perfetto", "t.json", "--steps", "1"], cwd=tmp_path)
    assert export.returncode != 0
    assert "no steps (figures are run totals); export it whole" in export.stderr
    base = run_cli(["baseline", "run", "-o", "b.json"], cwd=tmp_path)
    assert base.returncode == 0, base.stderr
    assert "no steps (figures are run totals)" in base.stderr
    assert json.loads((tmp_path / "b.json").read_text())["steps"] == 0
    found = run_cli(["discover", "-o", "found.yaml", "train.py"], cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert "no steps (figures are run totals)" in found.stderr
    assert "bytes total" in found.stderr and "bytes/step" not in found.stderr
