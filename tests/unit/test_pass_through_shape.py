"""pass_through's leaf-schema match respects shape and dtype, not only leaf names.

Issue 41 saw it on merged ranks: a received [8, 128] batch matched to an
unrelated [1024] all_reduce tensor, since both leaves were called alike and
were float32. Each departure here is a fresh tensor (no storage in common),
so only the schema can match; the control departs with the batch's own shape.
"""

from __future__ import annotations

import torch

import flowmap
from flowmap.findings import findings

STEPS = 4


def _run(tmp_path, leaving):
    path = str(tmp_path / "run")
    with flowmap.tracing(path, children=False):
        for step in range(STEPS):
            flowmap.step(step)
            flowmap.hop("rollout/0", "trainer/0", {"tensor": torch.zeros(8, 128)}, name="send",
                        transport="collective")
            flowmap.hop("trainer/0", "group[0,1]", {"tensor": leaving()}, name="all_reduce",
                        transport="collective")
    return [f for f in findings(flowmap.load(path).view) if f.kind == "pass_through"]


def test_a_batch_is_never_matched_to_an_unrelated_tensor_of_another_shape(tmp_path):
    # [1024] float32: the same name, dtype and even bytes as the [8, 128] batch's halves
    assert _run(tmp_path, lambda: torch.zeros(1024)) == []


def test_a_batch_is_never_matched_to_a_tensor_of_another_dtype(tmp_path):
    assert _run(tmp_path, lambda: torch.zeros(8, 128, dtype=torch.float64)) == []


def test_the_same_shape_and_dtype_leaving_is_a_pass_through(tmp_path):
    # the control: what arrived leaves again, a copy of the same shape and dtype
    (f,) = _run(tmp_path, lambda: torch.zeros(8, 128))
    assert "passes through trainer/0" in f.message and "shape" in f.message
    assert f.seams == ["rollout/0 -> trainer/0 : send", "trainer/0 -> group[0,1] : all_reduce"]
    assert f.bytes_per_step == 8 * 128 * 4


def test_a_stage_that_sends_tensors_it_made_is_no_relay_whatever_their_schema(tmp_path):
    # GIVEN a normaliser that receives bare rewards and sends bare advantages of the same
    # shape and dtype (new tensors), against one that sends the rewards themselves on
    import torch

    import flowmap
    from flowmap.findings import findings

    def run(path, made):
        with flowmap.tracing(path, children=False):
            for s in range(4):
                flowmap.step(s)
                r = torch.rand(4096)
                flowmap.hop("rollout", "normaliser", r, name="rewards", transport="pickle")
                out = (r - r.mean()) / r.std() if made else r
                flowmap.hop("normaliser", "trainer", out, name="advantages", transport="pickle")
        return [f for f in findings(flowmap.load(path).view) if f.kind == "pass_through"]

    # THEN storage identity decides: new tensors are the normaliser's own, the same ones relayed
    assert run(str(tmp_path / "made"), True) == []
    (f,) = run(str(tmp_path / "relayed"), False)
    assert "same storage" in f.message and f.bytes_per_step == 4096 * 4
