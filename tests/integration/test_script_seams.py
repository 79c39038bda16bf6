"""A script's own functions are seams, and a function imported into another module loses no call.

GIVEN a script nobody instrumented, whose pipeline functions live in the script itself (`__main__`)
and which imports a helper that its library also calls,
WHEN `flowmap discover` writes a map and `flowmap trace --seams` runs it,
THEN the script's functions are targets that record every call, and the helper records the calls
made through both modules.
"""

from __future__ import annotations

import textwrap

import pytest

import flowmap
from flowmap.seams import load_seam_map

pytest.importorskip("torch")

OPS = '''
import torch


def kl(a, b):
    return (a - b).exp() - (a - b) - 1


def penalty(a, b):
    return kl(a, b).mean()
'''

STEPS = '''
from ops import kl


class Batch:  # not a payload discovery looks into: experience() hands no tensor over itself
    def __init__(self, logp):
        self.logp = logp


def experience(logp):
    batch = Batch(logp)
    return float(kl(batch.logp, batch.logp * 0.5).mean())
'''

SCRIPT = '''
import torch

from ops import penalty
from steps import experience


def rollout(prompts):
    return torch.cat([prompts, prompts + 1], dim=1)


def group_advantages(rewards):
    return (rewards - rewards.mean()) / (rewards.std() + 1e-4)


def main():
    torch.manual_seed(0)
    for step in range(3):
        prompts = torch.randint(0, 9, (4, 5))
        seqs = rollout(prompts)
        adv = group_advantages(seqs.float().sum(dim=1))
        logp = torch.randn(4, 10)
        k = experience(logp)               # kl called through the name steps imported
        p = penalty(logp, logp + adv[:, None])  # kl called through ops' own name
        print(f"step {step}: {k + float(p):.3f}")


if __name__ == "__main__":
    main()
'''


def test_script_functions_are_targets_and_an_imported_helper_keeps_every_call(tmp_path, run_cli):
    (tmp_path / "ops.py").write_text(textwrap.dedent(OPS))
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS))
    (tmp_path / "pipe.py").write_text(textwrap.dedent(SCRIPT))
    seams = tmp_path / "seams.yaml"
    r = run_cli(["discover", "-o", str(seams), "pipe.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    targets = {s.target for s in load_seam_map(str(seams)).seams}
    # the script's functions are proposed as seams, not listed as "move it into a module"
    assert {"__main__:rollout", "__main__:group_advantages"} <= targets, r.stderr
    assert "move it into a module" not in r.stderr
    # the helper is named where it is defined, whichever module called it first
    assert "ops:kl" in targets and "steps:kl" not in targets
    t = run_cli(["trace", "-o", str(tmp_path / "run"), "--seams", str(seams), "pipe.py"],
                cwd=tmp_path)
    assert t.returncode == 0, t.stderr
    assert "never appeared" not in t.stderr, t.stderr
    assert t.stdout.count("step ") == 3
    run = flowmap.load(str(tmp_path / "run"))
    by_name: dict[str, int] = {}
    for h in run.hops:
        by_name[h.name] = by_name.get(h.name, 0) + 1
    owners = {s.owner for s in load_seam_map(str(seams)).seams
              if s.target == "__main__:rollout"}
    assert any(h.dst in owners for h in run.hops)
    # 3 steps x (one call through steps' name + one inside ops.penalty): 6 calls, each a
    # call hop and a result hop
    kl_spec = next(s for s in load_seam_map(str(seams)).seams if s.target == "ops:kl")
    kl_hops = [h for h in run.hops if kl_spec.owner in (h.src, h.dst)
               and h.name in (kl_spec.name, kl_spec.result_name)]
    assert len(kl_hops) == 12, (len(kl_hops), by_name)


def test_a_hand_written_main_target_is_recorded_and_a_missing_one_warned(tmp_path, run_cli):
    (tmp_path / "ops.py").write_text(textwrap.dedent(OPS))
    (tmp_path / "steps.py").write_text(textwrap.dedent(STEPS))
    (tmp_path / "pipe.py").write_text(textwrap.dedent(SCRIPT))
    (tmp_path / "seams.yaml").write_text(textwrap.dedent('''
        seams:
          - target: "__main__:group_advantages"
            owner: advantage
            args: [rewards]
          - target: "__main__:no_such_function"
            owner: nobody
    '''))
    t = run_cli(["trace", "-o", str(tmp_path / "run"), "--seams", "seams.yaml", "pipe.py"],
                cwd=tmp_path)
    assert t.returncode == 0, t.stderr
    assert "__main__:group_advantages never appeared" not in t.stderr
    assert ("seam-map target __main__:no_such_function never appeared (the script run by "
            "flowmap trace never defined it)") in t.stderr
    run = flowmap.load(str(tmp_path / "run"))
    calls = [h for h in run.hops if h.dst == "advantage"]
    results = [h for h in run.hops if h.src == "advantage"]
    assert len(calls) == len(results) == 3


SPLIT = '''
import torch


def log_probs(model, seqs):
    return torch.log_softmax(model(seqs), dim=-1)


def main():
    torch.manual_seed(0)
    model, ref_model = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    for _ in range(2):
        seqs = torch.randn(2, 4)
        with torch.no_grad():
            old = log_probs(model, seqs)
            ref = log_probs(ref_model, seqs)
        new = log_probs(model, seqs)
        (new - old - ref).sum().backward()


if __name__ == "__main__":
    main()
'''


def test_calls_of_one_function_are_told_apart_by_the_model_and_grad_mode(tmp_path, run_cli):
    (tmp_path / "split.py").write_text(textwrap.dedent(SPLIT))
    found = run_cli(["discover", "-o", "seams.yaml", "split.py"], cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    spec = next(s for s in load_seam_map(str(tmp_path / "seams.yaml")).seams
                if s.target == "__main__:log_probs")
    assert spec.split_by == ("model", "grad")
    t = run_cli(["trace", "-o", "run", "--seams", "seams.yaml", "split.py"], cwd=tmp_path)
    assert t.returncode == 0, t.stderr
    run = flowmap.load(str(tmp_path / "run"))
    calls: dict[str, int] = {}
    for h in run.hops:
        if h.src == "main":
            calls[h.dst] = calls.get(h.dst, 0) + 1
    owner = spec.owner
    assert calls == {f"{owner}/model": 2, f"{owner}/ref_model": 2, f"{owner}/model+grad": 2}
