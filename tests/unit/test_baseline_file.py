"""The baseline file: a faithful round trip, byte-stable, and loud refusals of foreign files."""

from __future__ import annotations

import json

import numpy as np
import pytest

import flowmap
from flowmap.check import baseline
from flowmap.check.snapshot import from_run
from flowmap.errors import UsageError


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("runs") / "run")
    with flowmap.tracing(path):
        for s in range(3):
            flowmap.step(s)
            flowmap.hop("batcher", "trainer/rank0",
                        {"tokens": np.zeros((8, 16), np.int64), "mask": np.ones((8, 16), bool)},
                        name="batch", dims={"tokens": ("B", "T")})
            flowmap.hop("rollout/0", "ready_buffer", {"ids": list(range(10 + s))}, name="trajectory")
            flowmap.counter("staleness", s)
    return flowmap.load(path)


def test_round_trip_is_exact(run, tmp_path):
    snap = from_run(run.view, counters=True)
    path = str(tmp_path / "b.json")
    baseline.write(path, snap)
    back = baseline.read(path)
    assert back.seams == snap.seams
    assert back.counters == snap.counters
    assert back.steps == 3


def test_file_is_sorted_stable_and_readable(run, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    baseline.write(str(a), from_run(run.view))
    baseline.write(str(b), from_run(flowmap.load(run.path).view))
    text = a.read_text()
    assert text == b.read_text()  # re-recording the same run changes nothing
    doc = json.loads(text)
    assert doc["flowmap"] == "baseline" and doc["schema"] == 1
    assert list(doc) == sorted(doc)
    seam = doc["seams"]["batcher -> trainer/rank0 : batch"]
    assert seam["bytes_per_step"] == 8 * 16 * 9 and seam["hops_per_step"] == 1.0
    assert seam["leaves"]["tokens"] == {
        "bytes_per_hop": 1024, "bytes_per_step": 1024, "dims": ["B", "T"],
        "dtype": "int64", "kind": "ndarray", "shape": [8, 16],
    }
    assert '"shape": [8, 16]' in text  # short lists stay on one line
    assert "counters" not in doc  # only with --counters


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"name": "some other tool"}', "not a flowmap baseline"),
        ('{"flowmap": "report", "schema": 1}', "not a flowmap baseline"),
        ('{"flowmap": "baseline", "schema": 99, "seams": {}}', "schema 99"),
        ("{not json", "not valid JSON (line 1)"),
        ('{"flowmap": "baseline", "schema": 1, "seams": {"a -> b : c": {}}}', "missing 'bytes_per_step'"),
        ('{"flowmap": "baseline", "schema": 1, "seams": {"nonsense": {}}}', "damaged"),
        ('{"flowmap": "baseline", "schema": 1, "seams": []}', "damaged"),
        ("[1, 2]", "not a flowmap baseline"),
    ],
)
def test_foreign_or_corrupt_files_are_usage_errors(tmp_path, content, message):
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(UsageError) as exc:
        baseline.read(str(path))
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_missing_file_says_how_to_record_one(tmp_path):
    with pytest.raises(UsageError, match="flowmap baseline RUN -o"):
        baseline.read(str(tmp_path / "nope.json"))


def test_binary_garbage_is_a_usage_error(tmp_path):
    path = tmp_path / "b.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UsageError, match="cannot read the baseline"):
        baseline.read(str(path))


def _ranked_run(path, second_shape):
    import os

    from runs import ShardWriter, tensor

    os.makedirs(path)
    w = ShardWriter(os.path.join(path, "h-1-0001.flowmap.jsonl"), 1)
    w.hop(1, "a", "b", "c", [tensor("x", (3,))], step=0)
    w.hop(2, "a", "b", "c", [tensor("x", second_shape)], step=0)
    w.close(10)
    return flowmap.load(path)


def test_a_leaf_whose_rank_varies_keeps_its_ranks_through_baseline_and_check(tmp_path):
    from flowmap.check.diff import diff_snapshots

    # GIVEN a leaf sent as [3] then [1×3] (rank 1..2), recorded as a baseline
    varied = from_run(_ranked_run(str(tmp_path / "varied"), (1, 3)).view)
    path = str(tmp_path / "b.json")
    baseline.write(path, varied)
    leaf = json.load(open(path))["seams"]["a -> b : c"]["leaves"]["x"]
    assert leaf["shape"] == [] and leaf["ranks"] == [1, 2]  # not a 0-d leaf
    back = baseline.read(path)
    assert back.seams == varied.seams and back.seams["a -> b : c"].leaves["x"].ranks == (1, 2)
    # THEN a run whose leaf keeps one rank is a change of shape, with the ranks said
    steady = from_run(_ranked_run(str(tmp_path / "steady"), (3,)).view)
    (delta,) = [d for d in diff_snapshots(back, steady) if d.leaves]
    (change,) = delta.leaves
    assert change.shape_changed and "[rank 1..2] -> [3]" in change.describe()


def test_a_baseline_written_before_ranks_reads_as_fixed_rank(tmp_path):
    varied = from_run(_ranked_run(str(tmp_path / "varied"), (1, 3)).view)
    path = tmp_path / "b.json"
    baseline.write(str(path), varied)
    doc = json.loads(path.read_text())
    del doc["seams"]["a -> b : c"]["leaves"]["x"]["ranks"]
    path.write_text(json.dumps(doc))
    assert baseline.read(str(path)).seams["a -> b : c"].leaves["x"].ranks is None
