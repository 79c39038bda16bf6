"""A broadcast is a duplicate only where the ranks are seen to go on with a part of it.

Two shards as two gloo ranks write them: the root's `broadcast` hop, the other
rank's receive, and what each rank sends next in the step. The real collectives
run in the corpus (examples/field/every_rank_broadcast*.py, broadcast_weights_fixed.py).
"""

from __future__ import annotations

import os

import pytest
from runs import ShardWriter, tensor

import flowmap
from flowmap.findings import broadcast_parts

B, T, STEPS = 64, 512, 3
GROUP = "group[0,1]"


def _run(path: str, after: tuple[tuple, int] | None) -> flowmap.Run:
    """Each step rank 0 broadcasts `[B, T]` int64 to rank 1; then each rank sends `after`
    (a leaf, and the storage id it has: 0 for the received storage itself)."""
    ranks = [ShardWriter(os.path.join(path, f"h-{pid}-0001.flowmap.jsonl"), pid)
             for pid in (1, 2)]
    for step in range(STEPS):
        t = 1000 * step
        got = 100 + step  # each step's batch is a fresh storage on each rank
        ranks[0].hop(t, "trainer/rank0", GROUP, "broadcast", [tensor("", (B, T), "int64")],
                     storages=(got,), step=step, transport="collective")
        ranks[1].hop(t + 1, GROUP, "trainer/rank1", "broadcast", [tensor("", (B, T), "int64")],
                     storages=(got + 50,), step=step, transport="collective")
        if after is not None:
            leaf, sid = after
            for r, w in enumerate(ranks):
                own = (got + 50 * r) if sid == 0 else sid + 10 * step + r
                w.hop(t + 10, f"trainer/rank{r}", GROUP, "gather", [leaf], storages=(own,),
                      step=step, transport="collective")
    for w in ranks:
        w.close(10_000)
    return flowmap.load(path)


@pytest.mark.parametrize(("after", "found"), [
    ((tensor("", (B // 2, T), "float32"), 7), True),  # results for its rows: [B/2, T]
    ((tensor("", (B // 2,), "float32"), 7), True),  # one figure a row: [B/2]
    ((tensor("", (B // 2, 7), "float32"), 7), False),  # B/2 rows of something else
    ((tensor("", (B * T // 4,), "int64"), 0), True),  # a slice of the received storage
    ((tensor("", (16, 128), "int64"), 7), False),  # its own data, of another size
    ((tensor("", (B, T), "int64"), 0), False),  # the whole of it sent on
    (None, False),  # nothing after: no evidence
])
def test_a_broadcast_is_a_duplicate_only_where_a_part_goes_on(tmp_path, after, found):
    run = _run(str(tmp_path / "run"), after)
    got = broadcast_parts.detect(run.view)
    if not found:
        assert got == []
        return
    (f,) = got
    # rank 1 received the whole batch each step and needed half of it
    assert f.kind == "duplicate" and f.bytes_per_step == B * T * 8 / 2
    assert f.seams == [f"{GROUP} -> trainer/rank1 : broadcast",
                       f"trainer/rank0 -> {GROUP} : broadcast"]


def test_a_view_of_the_received_storage_sent_on_is_a_part(tmp_path):
    """GIVEN rank 1 pickling a view of what it received (its note says the storage behind
    it is the received tensor's size) THEN the ranks kept a part; a note of a storage of
    another size says nothing."""
    for storage, found in ((B * T * 8, True), (B * T * 8 * 3, False)):
        path = str(tmp_path / f"run{storage}")
        w = ShardWriter(os.path.join(path, "h-2-0001.flowmap.jsonl"), 2)
        for step in range(STEPS):
            t = 1000 * step
            w.hop(t, GROUP, "trainer/rank1", "broadcast", [tensor("", (B, T), "int64")],
                  storages=(100 + step,), step=step, transport="collective")
            part = tensor("", (B * T // 2,), "int64")
            w.hop(t + 10, "trainer/rank1", "learner", "Tensor", [part], storages=(7,),
                  step=step, transport="pickle")
            w.writer.leaf_notes(t + 10, "trainer/rank1", "learner", "Tensor", "pickle", step,
                                [["", part[5], storage, None]])
        w.close(10_000)
        got = broadcast_parts.detect(flowmap.load(path).view)
        assert [f.bytes_per_step for f in got] == ([B * T * 8 / 2] if found else [])


def test_two_tensors_broadcast_in_turn_are_each_a_duplicate_when_the_rows_go_on(tmp_path):
    """GIVEN the batch broadcast as two tensors, token ids `[B, T]` int64 then advantages
    `[B, T]` float32, and each rank sending a loss per row of its part `[B/2]`, THEN both
    broadcasts are priced: the second is no next round of the first."""
    path = str(tmp_path / "run")
    ranks = [ShardWriter(os.path.join(path, f"h-{pid}-0001.flowmap.jsonl"), pid)
             for pid in (1, 2)]
    for step in range(STEPS):
        t = 1000 * step
        for i, dtype in enumerate(("int64", "float32")):
            leaf = tensor("", (B, T), dtype)
            ranks[0].hop(t + i, "trainer/rank0", GROUP, "broadcast", [leaf],
                         storages=(100 + 10 * step + i,), step=step, transport="collective")
            ranks[1].hop(t + i, GROUP, "trainer/rank1", "broadcast", [leaf],
                         storages=(200 + 10 * step + i,), step=step, transport="collective")
        for r, w in enumerate(ranks):
            w.hop(t + 10, f"trainer/rank{r}", GROUP, "gather", [tensor("", (B // 2,), "float32")],
                  storages=(7 + r,), step=step, transport="collective")
    for w in ranks:
        w.close(10_000)
    (f,) = broadcast_parts.detect(flowmap.load(path).view)
    assert f.bytes_per_step == B * T * (8 + 4) / 2


def test_one_message_a_socket_delivered_to_several_receivers_is_a_fan_out_not_copies():
    """GIVEN a PUB message joined to two subscribers (one send: its process, sender, name and
    time) and two PUSH sends of one storage to two workers THEN only the first is a fan-out:
    the second's copies are the sender's."""
    from flowmap.findings.duplicates import fanouts
    from flowmap.read.events import Hop

    def hop(t: int, dst: str, name: str) -> Hop:
        return Hop(t, 1, "trainer", dst, name, 4096, (), (5,), 0, None, "zmq", ())

    pub = [hop(10, "rollout/0", "PUB tcp://127.0.0.1:*"), hop(10, "rollout/1", "PUB tcp://127.0.0.1:*")]
    push = [hop(20, "rollout/0", "PUSH tcp://127.0.0.1:*"), hop(21, "rollout/1", "PUSH tcp://127.0.0.1:*")]
    assert fanouts([*pub, *push]) == [pub]
