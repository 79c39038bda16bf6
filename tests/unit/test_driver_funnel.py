"""The funnel across calls: a value returned to the driver and passed on as an argument."""

from __future__ import annotations

import torch

import flowmap
from flowmap.findings import findings

STEPS = 4


def _run(tmp_path, sent_on, arrival_transport="rpc"):
    """Rollout/1 returns a batch to the driver, which then calls the trainer with `sent_on`."""
    path = str(tmp_path / "run")
    with flowmap.tracing(path, children=False):
        for step in range(STEPS):
            flowmap.step(step)
            batch = {"obs": torch.zeros(8, 128), "mask": torch.ones(8, 128, dtype=torch.bool)}
            flowmap.hop("Rollout/1", "driver", {"result": batch}, name="generate",
                        transport=arrival_transport)
            flowmap.hop("driver", "Trainer/0", sent_on(batch), name="train", transport="rpc")
            # the driver's own traffic: a collective of an unrelated shape
            flowmap.hop("Trainer/0", "Trainer/0", {"grad": torch.zeros(1024)}, name="all_reduce",
                        transport="collective")
    return flowmap.load(path).view


def _pass_through(view):
    return [f for f in findings(view) if f.kind == "pass_through"]


def test_a_batch_fetched_and_passed_on_is_a_pass_through_naming_the_driver(tmp_path):
    # GIVEN the result arriving as `result.*` and leaving as the trainer's `batch.*`, a copy
    # (the trainer records the argument it unpickled: no storage in common)
    view = _run(tmp_path, lambda b: {"batch": {"obs": b["obs"].clone(), "mask": b["mask"].clone()},
                                     "lr": 0.1})
    # THEN one pass-through finding names the driver and both seams, with the batch's bytes
    (f,) = _pass_through(view)
    assert f.seams == ["Rollout/1 -> driver : generate", "driver -> Trainer/0 : train"]
    assert "passes through driver" in f.message and "ObjectRef" in f.message
    assert f.bytes_per_step == 8 * 128 * 4 + 8 * 128


def test_a_departure_of_other_shapes_is_no_pass_through(tmp_path):
    # GIVEN a driver that sends the trainer a tensor of the same bytes but another shape
    view = _run(tmp_path, lambda b: {"batch": torch.zeros(1024 + 256)})
    assert _pass_through(view) == []


def test_a_departure_of_another_dtype_is_no_pass_through(tmp_path):
    view = _run(tmp_path, lambda b: {"batch": {"obs": b["obs"].double(), "mask": b["mask"]}})
    assert _pass_through(view) == []


def test_a_ref_handed_on_is_no_pass_through(tmp_path):
    # GIVEN the fix: the driver holds only the ObjectRef (a `ref` hop moved no bytes)
    view = _run(tmp_path, lambda b: {"batch": {"obs": b["obs"].clone(), "mask": b["mask"].clone()}},
                arrival_transport="ref")
    assert _pass_through(view) == []
