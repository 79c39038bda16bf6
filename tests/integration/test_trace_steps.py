"""Steps in `flowmap trace SCRIPT` alone: one per optimizer update, wherever the script makes it.

GIVEN scripts nobody instrumented that call `optimizer.step()` in other places than once per
loop iteration (every k micro-batches, under a learning-rate scheduler; from a helper, with
a second optimizer stepping less often),
WHEN each is traced with no seam map,
THEN the run's steps are the updates of the optimizer that made the most, no off-by-one,
and the report says what counted them: "12 steps (torch.optim.SGD.step)".
"""

from __future__ import annotations

import json

import pytest

from flowmap.model.run import load

pytest.importorskip("torch")

ACCUMULATES = '''
import torch


def rollout(model, x):
    return model(x)


def loss_fn(out):
    return out.pow(2).mean()


def main():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    k = 3  # micro-batches per update
    for micro in range(12 * k + 2):  # 12 updates, and two micro-batches never applied
        loss = loss_fn(rollout(model, torch.randn(2, 4))) / k
        loss.backward()
        if (micro + 1) % k == 0:
            opt.step()
            sched.step()
            opt.zero_grad()


if __name__ == "__main__":
    main()
'''

TWO_OPTIMIZERS = '''
import torch


def act(actor, x):
    return actor(x)


def critic_loss(critic, x):
    return critic(x).pow(2).mean()


def update(opt, loss):
    opt.zero_grad()
    loss.backward()
    opt.step()


def main():
    actor, critic = torch.nn.Linear(4, 2), torch.nn.Linear(4, 1)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    critic_opt = torch.optim.RMSprop(critic.parameters(), lr=1e-3)
    for it in range(10):
        x = torch.randn(3, 4)
        update(actor_opt, act(actor, x).pow(2).mean())
        if it % 2 == 0:
            update(critic_opt, critic_loss(critic, x))


if __name__ == "__main__":
    main()
'''


@pytest.mark.slow
@pytest.mark.parametrize(("source", "updates", "counted_by"), [
    (ACCUMULATES, 12, "torch.optim.SGD.step"),
    (TWO_OPTIMIZERS, 10, "torch.optim.Adam.step"),
])
def test_steps_are_the_optimizer_updates(tmp_path, run_cli, source, updates, counted_by):
    script = tmp_path / "train.py"
    script.write_text(source)
    traced = run_cli(["trace", "-o", "run", str(script)], cwd=tmp_path, timeout=300)
    assert traced.returncode == 0, traced.stderr[-3000:]
    view = load(str(tmp_path / "run")).view
    assert (view.step_count, view.steps_from) == (updates, counted_by)
    report = run_cli(["report", "run"], cwd=tmp_path, env={"COLUMNS": "120"})
    assert f"{updates} steps ({counted_by})" in report.stdout
    assert json.loads(run_cli(["report", "run", "--json"], cwd=tmp_path).stdout)["steps"] == updates
