"""Budget YAML: the accepted forms, and mistakes named by file, line and key."""

from __future__ import annotations

import pytest

from flowmap.check.budget_file import parse, read
from flowmap.errors import UsageError

FULL = """\
version: 1
seams:
  "rollout/* -> ready_buffer : trajectory":
    max_bytes_per_hop: 64 KiB
    max_bytes_per_step: 2 MB
  batcher -> trainer:
    max_hops_per_step: 4
  "rollout -> weight_sync : paused":
    tolerance: 100 %
counters:
  staleness: {max: 2}
  in_flight: ["min >= 1", "max <= 32"]
  version_gap: "mean < 1.5"
items:
  max_dropped: 5 %
  max_dropped_by_reason: {stale: 3}
total:
  max_bytes_per_step: 16 MB
"""


def test_full_budget():
    b = parse(FULL, "budget.yaml")
    traj, batch, paused = b.seams
    assert paused.limits == {} and paused.tolerance == 1.0 and traj.tolerance is None
    assert b.tolerance_for("rollout/1", "weight_sync", "paused") == 1.0
    assert b.tolerance_for("rollout/1", "ready_buffer", "trajectory") is None
    assert traj.selector.src == "rollout/*" and traj.line == 3
    assert traj.limits["max_bytes_per_hop"].value == 65536
    assert traj.limits["max_bytes_per_hop"].text == "64 KiB"
    assert traj.limits["max_bytes_per_step"].value == 2_000_000
    assert batch.limits["max_hops_per_step"].value == 4
    assert [(c.counter, c.text) for c in b.counters] == [
        ("staleness", "max <= 2"), ("in_flight", "min >= 1"), ("in_flight", "max <= 32"),
        ("version_gap", "mean < 1.5"),
    ]
    assert b.max_dropped is not None and b.max_dropped.is_fraction and b.max_dropped.value == 0.05
    assert b.max_dropped_by_reason["stale"].value == 3 and not b.max_dropped_by_reason["stale"].is_fraction
    assert b.total["max_bytes_per_step"].value == 16_000_000


def test_counter_expression_list_and_min_default():
    b = parse("counters:\n  - staleness.max <= 2\n  - kv.cache.use.mean < 0.9\n")
    assert [(c.counter, c.stat, c.op, c.value) for c in b.counters] == [
        ("staleness", "max", "<=", 2.0), ("kv.cache.use", "mean", "<", 0.9)]
    b = parse("counters:\n  in_flight: {min: 1, max: 8}\n")
    assert [c.text for c in b.counters] == ["min >= 1", "max <= 8"]


def test_empty_file_is_an_empty_budget():
    assert parse("").seams == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seam:\n  a -> b: {}\n", "b.yaml line 1: unknown key 'seam'; expected one of counters, items, seams, total, version"),
        ("seams:\n  a -> b:\n    max_byte_per_hop: 1 KB\n", "b.yaml line 3: unknown key 'max_byte_per_hop' under seam 'a -> b'"),
        ("seams:\n  a -> b:\n    max_bytes_per_hop: 2 XB\n", "b.yaml line 3: cannot read '2 XB' as a size"),
        ("seams:\n  nonsense:\n    max_bytes_per_hop: 1 KB\n", "b.yaml line 2: cannot read the seam 'nonsense'"),
        ("seams:\n  a -> b: 5\n", "b.yaml line 2: seam 'a -> b' must be a mapping"),
        ("seams:\n  a -> b:\n    tolerance: 10\n", "b.yaml line 3: tolerance 10 is ambiguous"),
        ("total:\n  max_bytes: 1 MB\n", "b.yaml line 2: unknown key 'max_bytes' under 'total'"),
        ("items:\n  max_dropped: lots\n", "b.yaml line 2: cannot read max_dropped 'lots'"),
        ("counters:\n  staleness: {median: 2}\n", "b.yaml line 2: unknown key 'median' under counter 'staleness'"),
        ("counters:\n  staleness: \"max about 2\"\n", "b.yaml line 2: cannot read 'max about 2'"),
        ("counters:\n  - staleness is small\n", "b.yaml line 2: cannot read the counter limit"),
        ("counters:\n  - staleness.p99 <= 2\n", "b.yaml line 2: unknown counter statistic 'p99'"),
        ("seams:\n  a -> b: {max_bytes_per_hop: 1 KB}\n  a -> b: {max_bytes_per_hop: 2 KB}\n", "b.yaml line 3: duplicate key 'a -> b'"),
        ("seams: [unclosed\n", "b.yaml line 2: not valid YAML"),
        ("version: 2\n", "b.yaml line 1: budget version 2 is not supported"),
        ("- just\n- a list\n", "b.yaml line 1: the budget file must be a mapping"),
    ],
)
def test_mistakes_name_file_and_line(text, message):
    with pytest.raises(UsageError) as exc:
        parse(text, "b.yaml")
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_missing_file(tmp_path):
    with pytest.raises(UsageError, match="budget file .* not found"):
        read(str(tmp_path / "none.yaml"))


def test_yaml_tags_cannot_run_code():
    with pytest.raises(UsageError, match="not valid YAML"):
        parse("seams: !!python/object/apply:os.system ['true']\n")
