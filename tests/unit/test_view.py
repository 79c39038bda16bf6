"""The read model: one frozen `RunView` per run, whose figures match the hops they came from."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest
from runs import write_rl_run, write_two_owner_run

import flowmap
from flowmap.findings import findings
from flowmap.model.types import SeamStats


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory):
    return flowmap.load(write_rl_run(str(tmp_path_factory.mktemp("rl") / "run")))


def test_the_view_is_built_once_and_cannot_be_changed(rl_run):
    view = rl_run.view
    assert rl_run.view is view
    seam = next(iter(view.seams.values()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        seam.total_bytes = 0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.num_steps = 1  # type: ignore[misc]
    assert view.roles is view.roles


def test_seam_figures_match_the_hops(rl_run):
    """GIVEN the hops WHEN summed by hand per seam and per step THEN the view says the same."""
    by_seam: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    per_step: dict[tuple[str, str, str], dict[int | None, list[int]]] = defaultdict(
        lambda: defaultdict(list))
    for h in rl_run.hops:
        by_seam[h.seam].append(h.nbytes)
        per_step[h.seam][h.step].append(h.nbytes)
    view = rl_run.view
    assert set(view.seams) == set(by_seam)
    for key, s in view.seams.items():
        sizes = by_seam[key]
        assert (s.hops, s.total_bytes, s.min_bytes, s.max_bytes) == (
            len(sizes), sum(sizes), min(sizes), max(sizes))
        assert s.bytes_per_step_max == max(sum(v) for v in per_step[key].values())
        assert s.hops_per_step_max == max(len(v) for v in per_step[key].values())
        assert s.hop_bytes == tuple(sizes)
    assert view.totals.total_bytes == sum(h.nbytes for h in rl_run.hops)
    assert view.totals.max_hop_bytes == max(h.nbytes for h in rl_run.hops)


def test_varying_dims_are_tuples(rl_run):
    tokens = next(leaf for s in rl_run.view.seams.values() for leaf in s.leaves
                  if leaf.path == "input_ids" and not isinstance(leaf.shape[0], int))
    lo, hi = tokens.shape[0]  # type: ignore[misc]
    assert isinstance(tokens.shape, tuple) and isinstance(tokens.shape[0], tuple) and lo < hi


def test_the_pipeline_orders_owners_and_marks_the_loop(rl_run):
    view = rl_run.view
    order = view.order
    assert order[0] == "dataset" and order.index("rollout/0") < order.index("trainer/rank0")
    assert view.back_edges == {("weight_sync", "rollout/0", "weights"),
                               ("weight_sync", "rollout/1", "weights")}
    for e in view.pipeline.edges:  # every other edge runs forward
        if not e.back_edge:
            assert order.index(e.seam.src) <= order.index(e.seam.dst)


def test_roles_merge_instances_and_re_aggregate_their_hops(rl_run):
    roles = rl_run.view.roles
    edge = next(e for e in roles.edges if e.seam.key == ("rollout", "ready_buffer", "trajectory"))
    hops = [h.nbytes for h in rl_run.hops
            if h.src.startswith("rollout/") and h.seam[1:] == ("ready_buffer", "trajectory")]
    assert (edge.seam.hops, edge.seam.total_bytes, edge.seam.max_bytes) == (
        len(hops), sum(hops), max(hops))
    assert edge.members == ("rollout/0 -> ready_buffer : trajectory",
                            "rollout/1 -> ready_buffer : trajectory")
    assert roles.node("rollout").label == "rollout ×2"
    assert roles.total_bytes == rl_run.view.pipeline.total_bytes


def test_step_bins_add_up_to_each_seam(rl_run):
    view = rl_run.view
    binned = view.step_bins(max_bins=3)
    assert len(binned.bins) == 3 and sum(b.num_steps for b in binned.bins) == len(view.steps)
    for key, s in view.seams.items():
        assert sum(binned.bytes[key]) == s.total_bytes and sum(binned.hops[key]) == s.hops


def test_resident_items_count_arrivals_minus_departures(tmp_path):
    """GIVEN 3 items into b then 2 out WHEN read THEN b held 1, 2, 3, then 2, 1."""
    hops = [(0, "a", "b", "x", 8, [1]), (10, "a", "b", "x", 8, [2]), (20, "a", "b", "x", 8, [3]),
            (30, "b", "c", "x", 8, [1]), (40, "b", "c", "x", 8, [2])]
    view = flowmap.load(write_two_owner_run(str(tmp_path / "run"), hops)).view
    b = view.pipeline.node("b")
    assert [c for _, c in b.resident] == [1, 2, 3, 2, 1] and b.resident_max == 3


def test_an_empty_run_has_an_empty_view(tmp_path):
    view = flowmap.load(write_two_owner_run(str(tmp_path / "run"), [])).view
    assert (view.seams, view.pipeline.nodes, findings(view)) == ({}, (), [])
    assert view.totals.bytes_per_step_max == 0 and view.duration_s == 0


def test_seam_stats_is_fully_typed():
    """No field of the contract is `Any`: a typo'd field name fails mypy, not a reader."""
    hints = {f.name: f.type for f in dataclasses.fields(SeamStats)}
    assert "Any" not in " ".join(map(str, hints.values()))


def test_every_finding_leads_back_to_its_seams(rl_run):
    view = rl_run.view
    found = findings(view)
    assert found
    for f in found:
        assert all(view.seams_by_label[label].label == label for label in f.seams)
