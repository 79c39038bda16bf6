"""The event table: each field type admits what the writer writes and nothing hostile."""

from __future__ import annotations

import json

import pytest

import flowmap
from flowmap import trace_format as tf
from flowmap.read.validate import CHECKS

S = {0: "a", 1: "b", 2: "ref"}
SC = {0: ()}
GOOD = {
    tf.STRING: ["s", 3, "text"],
    tf.SCHEMA: ["S", 1, [[0, "tensor", [2, [3, 4]], 1, 1, 96, 1, ["tokens", "dim"]]]],
    tf.HOP: ["h", 10, 0, 1, 0, 0, 96, [0, 1], 3, None, 2, [7, "uid"]],
    tf.COUNTER: ["c", 10, 0, 1.5, 1],
    tf.MARK: ["m", 10, 0, 1],
    tf.DROP: ["d", 10, 0, 1, [1, 2]],
    tf.STEP: ["p", 10, 4],
    tf.ERROR: ["e", 10, "boom"],
    tf.END: ["end", 10, {"events": 3, "errors": 0}],
    tf.SEND_HALF: ["x", 10, 0, 1, 0, 0, 96, [], 3, None, 2, None, 1, "digest", 120],
    tf.RECEIVE_HALF: ["y", 10, 1, 0, 2, 1, "digest", None, [3, 4], 0, [5, 6]],
    tf.AGGREGATE: ["a", 10, 0, 1, 0, 0, 3, 2, 5, 480, 64, 128, None, 9, None, 2, 4],
    tf.SEND_FOLD: ["X", 10, 0, 1, 0, 0, 3, 2, 5, 480, 64, 128, 500, 0, None, None, 4, 1],
    tf.RECEIVE_FOLD: ["Y", 10, 1, 0, 2, 1, None, 5, 500, 4],
    tf.COUNTER_FOLD: ["C", 10, 0, 1, 3, 4, 10.5, 0.5, 4.0, 2.0, 4],
    tf.MARK_FOLD: ["M", 10, 0, 1, 3, 7, 4],
    tf.DROP_FOLD: ["D", 10, 0, 1, None, 2, 5, 4],
    tf.LEAF_NOTES: ["n", 10, 0, 1, 0, 2, 3, [["row", 4096, 4194304, None], ["mask", 16, None, 9]]],
    tf.TEXT_KEYS: ["t", 10, 0, 1, 0, [1, 2, 3]],
    tf.WINDOWS: ["w", 10, 0, 1, 0, [["obs", [12, 3_000_000_000, 0]], ["ids", [7]]]],
    tf.PROCESS_INFO: ["i", 10, "ray_node_id", "5f1c"],
    tf.VALUES: ["v", 10, 0, 1, 0, 2, 3, [["ids", 0, 63, None, 120, 4096],
                                         ["lengths[*]", 3, 90.5, 200, None, 4]]],
    tf.PART: ["b", 12, 7],
    tf.ORIGIN: ["o", 12, 2],
}
HOSTILE = ["x" * (tf.MAX_TEXT + 1), 10**400, -(10**400), float("nan"), float("inf"), 2**70,
           [], {}, None, True, 1.5, 999, "\ud800", [[[[]]]]]


def test_the_table_covers_every_kind_and_the_good_events_pass():
    assert set(GOOD) == set(tf.EVENTS)
    for kind, ev in GOOD.items():
        assert CHECKS[kind](ev, S, SC), kind


@pytest.mark.parametrize("kind", sorted(tf.EVENTS))
def test_no_hostile_field_passes_unless_the_type_admits_it(kind):
    """Every replacement is either refused or is a value of the field's own type."""
    admitted = {
        tf.TEXT: lambda v: type(v) is str and len(v) <= tf.MAX_TEXT,
        tf.OPT_INT: lambda v: v is None or (type(v) is int and abs(v) <= tf.MAX_INT),
        tf.ITEMS: lambda v: v is None or v == [],
        tf.INTS: lambda v: v == [],
        tf.NUMBER: lambda v: (type(v) is int and abs(v) <= tf.MAX_INT)
        or (type(v) is float and abs(v) <= tf.MAX_NUMBER),
        tf.TIME: lambda v: type(v) is int and abs(v) <= tf.MAX_TIME_US,
        tf.COUNT: lambda v: type(v) is int and 0 <= v <= tf.MAX_INT,
        tf.ID: lambda v: type(v) is int and 0 <= v <= tf.MAX_ID,
        tf.STR_REF: lambda v: type(v) is int and v in S,
        tf.SCHEMA_REF: lambda v: type(v) is int and v in SC,
        tf.LEAVES: lambda v: v == [],
        tf.NOTES: lambda v: v == [],
        tf.FIGURES: lambda v: v == [],
        tf.WINDOW_LIST: lambda v: v == [],
        tf.STATS: lambda v: v == {},
    }
    for i, (_, ftype) in enumerate(tf.EVENTS[kind], start=1):
        for value in HOSTILE:
            ev = list(GOOD[kind])
            ev[i] = value
            assert CHECKS[kind](ev, S, SC) == admitted[ftype](value), (kind, i, repr(value)[:40])


def test_short_events_are_refused_and_extra_fields_ignored():
    assert not CHECKS[tf.HOP](GOOD[tf.HOP][:-1], S, SC)
    assert CHECKS[tf.HOP](GOOD[tf.HOP] + ["from a newer writer"], S, SC)
    assert CHECKS[tf.COUNTER](GOOD[tf.COUNTER][:4], S, SC)  # owner is optional (older writers)
    # a receive half's storages are optional (older writers), checked when present
    assert CHECKS[tf.RECEIVE_HALF](GOOD[tf.RECEIVE_HALF][:8], S, SC)
    assert not CHECKS[tf.RECEIVE_HALF](GOOD[tf.RECEIVE_HALF][:8] + [["x"]], S, SC)


def test_a_dangling_interned_id_skips_only_its_event(tmp_path):
    with flowmap.tracing(tmp_path / "run"):
        for i in range(10):
            flowmap.hop("a", "b", i, items=[i])
    (shard,) = (tmp_path / "run").glob("*.jsonl")
    lines = shard.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(b'["h"'))
    ev = json.loads(lines[at + 2])
    ev[2] = 12345
    lines[at + 2] = json.dumps(ev).encode()
    shard.write_bytes(b"\n".join(lines))
    run = flowmap.load(tmp_path / "run")
    assert [h.items[0] for h in run.hops] == [i for i in range(10) if i != 2]
    assert run.health.bad_lines == 1 and f"first at line {at + 3}" in run.health.problems[0]


def test_value_figures_refuse_non_finite_numbers_and_negative_counts():
    good = GOOD[tf.VALUES]
    assert CHECKS[tf.VALUES](good, S, SC)
    for bad in (["ids", float("nan"), 1, None, 0, 4], ["ids", 0, 1, None, -1, 4],
                ["ids", 0, 1, None, 0], ["ids", 0, True, None, 0, 4]):
        assert not CHECKS[tf.VALUES](good[:7] + [[bad]], S, SC), bad
