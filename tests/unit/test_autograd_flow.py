"""A training step fed outside its arguments: the loss's graph names the stages that fed it.

GIVEN a stage's result kept on a list (as actor_critic's `model.saved_actions`) and a
training step that takes no arguments,
WHEN its loss's `backward()` runs under a trace with autograd following on,
THEN a hop from that stage to the step carries the tensors it handed over; a result the
loss never used, or one that died before, makes none; and the program's own backward
(and its errors) are untouched.
"""

from __future__ import annotations

import pytest

import flowmap
from flowmap.integrations import autograd_flow

torch = pytest.importorskip("torch")


def _run(tmp_path, body):
    autograd_flow.enable()
    path = str(tmp_path / "run")
    with flowmap.tracing(path):
        body()
    return flowmap.load(path).view


def test_the_step_reading_a_list_is_fed_by_the_stage_that_filled_it(tmp_path):
    layer = torch.nn.Linear(4, 2)
    saved: list = []
    unused: list = []

    def finish_episode():
        loss = torch.stack(saved).sum()
        loss.backward()

    def body():
        for _ in range(3):
            out = layer(torch.randn(4))
            autograd_flow.note("Policy", "forward", out, "main")
            saved.append(out)
            other = layer(torch.randn(4)) * 2
            autograd_flow.note("critic", "value", other, "main")  # never part of the loss
            unused.append(other)
        finish_episode()

    view = _run(tmp_path, body)
    hops = [h for h in view.events.hops if h.dst == "finish_episode"]
    assert [(h.src, h.name) for h in hops] == [("Policy", "forward")]
    assert hops[0].nbytes == 3 * 2 * 4  # the three float32 (2,) results, metadata only


def test_a_dead_result_is_never_matched_and_errors_pass_through(tmp_path):
    layer = torch.nn.Linear(4, 2)

    def step():
        out = layer(torch.randn(4))
        autograd_flow.note("Policy", "forward", out.detach().requires_grad_(), "main")
        loss = out.sum()
        loss.backward()
        with pytest.raises(RuntimeError, match="does not require grad"):
            torch.zeros(1).sum().backward()  # the program's own error, unchanged

    def body():
        gone = layer(torch.randn(4)) * 3
        autograd_flow.note("ghost", "x", gone, "main")
        del gone  # died before any backward: its node may be gone, its id reused
        step()

    view = _run(tmp_path, body)
    assert not [h for h in view.events.hops if h.dst == "step"]


def test_a_result_its_seam_already_handed_to_the_learner_is_not_sent_again(tmp_path):
    # GIVEN a loss stage whose result hop went to finish_episode, which calls backward on it
    layer = torch.nn.Linear(4, 2)

    def finish_episode(loss):
        loss.backward()

    def body():
        loss = layer(torch.randn(4)).sum()
        autograd_flow.note("compute_loss", "loss", loss, "finish_episode")
        finish_episode(loss)

    view = _run(tmp_path, body)
    # THEN no autograd hop repeats the seam's own (it would count one hop twice per call)
    assert not [h for h in view.events.hops if h.dst == "finish_episode"]


def test_a_seam_map_targets_result_is_followed_without_the_seams_knowing_autograd(
        tmp_path, monkeypatch):
    """The seam wrapper calls the result watchers registered with it; `enable()` registers
    the autograd walk there (seam maps sit below the integrations and never import them)."""
    import importlib
    import sys

    from flowmap.seams import Patcher, parse_seam_map

    (tmp_path / "watched_policy.py").write_text(
        "def act(layer, x):\n    return layer(x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    policy = importlib.import_module("watched_policy")
    layer = torch.nn.Linear(4, 2)
    saved: list = []

    def finish_episode():
        torch.stack(saved).sum().backward()

    def body():
        Patcher(parse_seam_map('seams:\n  - target: "watched_policy:act"\n'
                               '    owner: Policy\n    args: [x]\n')).install()
        for _ in range(2):
            saved.append(policy.act(layer, torch.randn(4)))
        finish_episode()

    try:
        view = _run(tmp_path, body)
    finally:
        sys.modules.pop("watched_policy", None)
    hops = [h for h in view.events.hops if h.dst == "finish_episode"]
    assert [(h.src, h.name) for h in hops] == [("Policy", "act")]
    assert hops[0].nbytes == 2 * 2 * 4


def test_dead_results_leave_the_noted_list_at_the_next_backward(tmp_path):
    # GIVEN many results noted and dropped (a long rollout), then one backward
    layer = torch.nn.Linear(4, 2)

    def body():
        for _ in range(500):
            autograd_flow.note("Policy", "forward", layer(torch.randn(4)), "main")
        kept = layer(torch.randn(4))
        autograd_flow.note("Policy", "forward", kept, "main")
        kept.sum().backward()
        # THEN only the result still alive is kept: a later backward does not scan the dead
        assert len(autograd_flow._noted) == 1

    _run(tmp_path, body)
