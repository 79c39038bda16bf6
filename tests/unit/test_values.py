"""`flowmap trace --values`: what the sampler reads, how often, and that nothing is read without it."""

from __future__ import annotations

import glob
import json

import numpy as np
import pytest
import torch

import flowmap
from flowmap.capture import values


@pytest.fixture
def sampling():
    values.set_enabled(True)
    values._seen.clear()
    yield
    values.set_enabled(False)
    values._seen.clear()


def test_figures_of_arrays_lists_and_nesting():
    ids = torch.zeros(3, 10, dtype=torch.int64)
    ids[0, :4] = 7
    ids[1, 2:9] = 300  # a leading zero is inside the row: only the tail counts
    experts = np.zeros((2, 5, 4), dtype=np.int32)
    experts[0, :2] = 9
    got = {f[0]: f[1:] for f in values.figures({
        "input_ids": ids, "lengths": [4, 9, 0], "routed": experts,
        "trajs": [{"lp": np.array([-1.0, 0.0, 0.0])}, {"lp": np.array([0.0, -2.0])}],
        "bf": torch.ones(2, 2, dtype=torch.bfloat16), "name": "x"})}
    assert got["input_ids"] == [0, 300, None, 6 + 1 + 10, 30, 4 + 7]
    assert got["lengths[*]"] == [0, 9, 13, None, 3, None]
    assert got["routed"] == [0, 9, None, (3 + 5) * 4, 40, 2 * 4]
    assert got["trajs[*].lp"] == [-2.0, 0.0, None, 2 + 0, 5, 1 + 1]
    assert got["bf"] == [1.0, 1.0, None, 0, 4, 4]
    assert "name" not in got


def test_figures_leave_out_non_finite_values_and_big_arrays():
    got = values.figures({"nan": np.array([1.0, np.nan]), "big": np.zeros(values.MAX_ELEMENTS + 1),
                          "ok": np.array([True, False])})
    assert [f[0] for f in got] == ["ok"] and got[0][1:3] == [0, 1]


def test_the_sampler_reads_the_first_hops_then_one_in_every():
    values._seen.clear()
    due = [values.due("a", "b", "x") for _ in range(40)]
    assert [i for i, d in enumerate(due) if d] == [0, 1, 2, 3, 16, 32]
    assert values.due("a", "c", "x")  # a seam of its own


def _value_events(run: str) -> list:
    out = []
    for shard in glob.glob(f"{run}/*.flowmap.jsonl"):
        with open(shard) as f:
            out += [ev for ev in map(json.loads, f) if isinstance(ev, list) and ev[0] == "v"]
    return out


def test_values_are_recorded_only_when_asked_and_only_for_hops_that_move_bytes(tmp_path,
                                                                               sampling):
    batch = {"experts": torch.randint(0, 64, (16, 4), dtype=torch.int32)}
    with flowmap.tracing(str(tmp_path / "on")):
        flowmap.hop("rollout", "trainer", batch, transport="rpc")
        flowmap.hop("rollout", "buffer", batch)  # by reference: nothing moved, nothing read
    (ev,) = _value_events(str(tmp_path / "on"))
    assert ev[-1][0][:3] == ["experts", int(batch["experts"].min()),
                             int(batch["experts"].max())]
    view = flowmap.load(str(tmp_path / "on")).view
    (v,) = [v for sh in view.events.shards for v in sh.values]
    assert (v.src, v.dst, v.path, v.elements) == ("rollout", "trainer", "experts", 64)
    values.set_enabled(False)
    with flowmap.tracing(str(tmp_path / "off")):
        flowmap.hop("rollout", "trainer", batch, transport="rpc")
    assert _value_events(str(tmp_path / "off")) == []
