"""The one encoder of the trace format: every line kind it writes reads back, ids stay per shard."""

from __future__ import annotations

import os
import random
import weakref

import pytest

import flowmap
from flowmap.writer import HopTally, TraceWriter, encode_line, items_json, storage_table

LEAVES = [("x", "tensor", (4, 8), "float32", "cpu", 128, 1, ("tokens", "dim"))]


def _shard(path: str, write) -> None:
    lines: list[str] = []
    w = TraceWriter(lines.append)
    w.header({"pid": 7, "ppid": 1, "host": "h", "argv": ["t.py"], "process": "p",
              "t0_mono_ns": 10**12, "t0_wall_ns": 1_700_000_000 * 10**9})
    write(w)
    w.end(10_000, len(lines), 0)
    with open(os.path.join(path, "h-7-0001.flowmap.jsonl"), "wb") as f:
        f.write(b"".join(map(encode_line, lines)))


def test_every_line_kind_it_writes_reads_back(tmp_path) -> None:
    def write(w: TraceWriter) -> None:
        w.step(1, 0)
        w.hop(2, "a", "b", "x", LEAVES, 128, w.storage_ids([11, 12]), 0, 3, "ref", items_json([1, 2]))
        w.send_half(3, "a", "(untraced)", "msg", LEAVES, 128, w.storage_ids([13]), 0, None, "mp",
                    items_json(["t9"]), "chan", "k1", 140)
        w.leaf_notes(3, "a", "(untraced)", "msg", "mp", 0, [["row", 64, 4096, None],
                                                           ["mask", 16, None, 9]])
        w.receive_half(4, "c", "msg", "mp", "chan", "k1", 140)
        w.counter(5, "depth", 2.5, "a")
        w.mark(6, "sync", "a")
        w.drop(7, "a", "stale", ["t1"])
        w.error(8, "ValueError: boom")
        tally = HopTally(128, 20, 2, 1, None)
        tally.add(256, 30, 1, 2, None)
        w.step(19, 1)
        w.hop_fold("a", "b", "x", LEAVES, 1, "ref", tally)
        w.send_fold("a", "(untraced)", "msg", LEAVES, 1, "mp", "chan", HopTally(64, 31, 0, None, 70))
        w.receive_fold(32, "c", "msg", "mp", "chan", 1, 1, 70, 32)
        w.counter_fold(33, "depth", "a", 1, 2, 5.0, 2.0, 3.0, 3.0, 21)
        w.mark_fold(34, "sync", "a", 1, 2, 22)
        w.drop_fold(35, "a", "stale", 1, 2, 3, 23)

    _shard(str(tmp_path), write)
    run = flowmap.load(str(tmp_path))
    assert run.problems == []
    hops = {(h.src, h.dst, h.name) for h in run.hops}
    assert {("a", "b", "x"), ("a", "c", "msg")} <= hops  # the halves joined into one hop
    folded = {(s.src, s.dst, s.name): s for s in run.seam_steps}
    assert folded[("a", "b", "x")].hops == 2 and folded[("a", "b", "x")].nbytes_sum == 384
    assert run.health.error_messages == ("ValueError: boom",) and run.health.bad_lines == 0
    assert [(m.name, m.owner) for m in run.marks] == [("sync", "a")]
    assert [(d.owner, d.items) for d in run.drops] == [("a", ("t1",))]
    assert [c.count for c in run.counter_folds] == [2] and [m.count for m in run.mark_folds] == [2]
    assert [(d.count, d.num_items) for d in run.drop_folds] == [(2, 3)]
    assert [h.items for h in run.hops if h.name == "msg"] == [("t9",)]  # tagged at the send
    notes = [(n.src, n.name, n.path, n.nbytes, n.storage_bytes, n.real)
             for sh in run.shards for n in sh.notes]
    assert notes == [("a", "msg", "row", 64, 4096, None), ("a", "msg", "mask", 16, None, 9)]


class Held:
    """Something a storage key stands for, weakly referable as a tensor is."""


@pytest.mark.parametrize("c_twin", [True, False], ids=["C", "Python"])
def test_storage_ids_are_those_interning_one_by_one_gives(monkeypatch: pytest.MonkeyPatch,
                                                          c_twin: bool) -> None:
    """Ids in order of first sight, one per storage (also when a hop names it twice), and
    unique in the shard across the clearing of a full table; with the C twin of the common
    case (`cids.c`) and without it."""
    monkeypatch.setattr(storage_table, "MAX_STORAGE_IDS", 16)
    if not c_twin:
        monkeypatch.setattr(storage_table, "known_ids", None)
    elif storage_table.known_ids is None:
        pytest.skip("the C twin is not built here (or FLOWMAP_PURE_PYTHON=1)")
    rng = random.Random(3)
    batched, single = TraceWriter(lambda s: None), TraceWriter(lambda s: None)
    holder: dict[object, Held] = {}  # each key's storage, alive throughout: ids are kept
    for _ in range(300):
        keys: list[object] = [rng.randrange(40) if rng.random() < 0.8 else (rng.randrange(4), "cuda:0")
                              for _ in range(rng.randrange(70))]
        held = [holder.setdefault(k, Held()) for k in keys]
        one_by_one = ",".join([single.storage_id(k, h) for k, h in zip(keys, held)])
        assert batched.storage_ids(keys, held) == one_by_one


def test_the_c_twin_of_storage_ids_is_built_here() -> None:
    # Without it, the C case above would be skipped and prove nothing.
    if os.environ.get("FLOWMAP_PURE_PYTHON"):
        pytest.skip("FLOWMAP_PURE_PYTHON=1: the C twins are off")
    assert storage_table.known_ids is not None
    live, dead = Held(), Held()
    ref, gone = weakref.ref(live), weakref.ref(dead)
    del dead
    table = {5: ("0", ref), (5, "cuda:0"): ("1", ref)}
    assert storage_table.known_ids(table, [5, (5, "cuda:0"), 5]) == "0,1,0"
    assert storage_table.known_ids(table, [5, 6]) is None
    assert storage_table.known_ids({**table, 7: ("2", gone)}, [5, 7]) is None  # freed: not that storage
    assert storage_table.known_ids({5: "0"}, [5]) is None  # not an (id, ref) entry
    assert storage_table.known_ids({}, []) == ""


@pytest.mark.parametrize("c_twin", [True, False], ids=["C", "Python"])
def test_an_address_whose_holder_died_gets_a_new_id(monkeypatch: pytest.MonkeyPatch,
                                                      c_twin: bool) -> None:
    """The allocator hands a freed storage's address to the next one: never the old id."""
    if not c_twin:
        monkeypatch.setattr(storage_table, "known_ids", None)
    w = TraceWriter(lambda s: None)
    first, other = Held(), Held()
    a = w.storage_ids([100, 200], [first, other])
    assert w.storage_ids([100, 200], [first, other]) == a  # alive: the same storages
    del first
    b = w.storage_ids([100, 200], [Held(), other])  # 100 now another storage's address
    assert b.split(",")[0] not in a.split(",") and b.split(",")[1] == a.split(",")[1]
    assert w.storage_ids([300, 300], None) == "3,4"  # no holder: never met again
    with pytest.raises(TypeError):
        storage_table.known_ids({}, (5,))  # type: ignore[arg-type]
