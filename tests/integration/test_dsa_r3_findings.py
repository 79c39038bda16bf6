"""The finding the DSA R3 case rests on, on hand-written runs (no torch, no processes).

A replay array with declared dims that is repacked on its way (a list of
trajectories, then a batch, then micro-batches) is one pass-through finding
along the whole chain of middle roles, ranked above the seams it rides; a chain
whose middles are all whole-payload pass-throughs already is not repeated; an
array that only goes from its producer to its consumer is no pass-through.
"""

from __future__ import annotations

from pathlib import Path

from runs import ShardWriter, tensor

import flowmap
from flowmap.findings import findings

DIMS = ("tokens", "layers", "index_topk")


def _write(path: Path, *, with_store: bool = False, repack: bool = True) -> str:
    w = ShardWriter(str(path / "testhost-1-0001.flowmap.jsonl"), 1, "driver")
    for s in range(3):
        base = 1_000 + s * 100_000
        w.step(base, s)
        items = [f"t{s}-{i}" for i in range(4)]
        per = [tensor("[*].indexer_topk", (20, 2, 8), "int32", count=2, dims=DIMS),
               tensor("[*].input_ids[*]", (20,), "int64", count=2)]
        for i in (0, 1):
            w.hop(base + 10 + i, f"rollout/{i}", "ready_buffer", "trajectory", per, step=s,
                  items=items[2 * i: 2 * i + 2])
        if repack:  # the buffer hands on leaves; the batcher collates; the ranks get slices
            w.hop(base + 100, "ready_buffer", "batcher", "samples",
                  [tensor("[*].indexer_topk", (20, 2, 8), "int32", count=4, dims=DIMS)],
                  step=s, items=items)
            batch = [tensor("indexer_topk", (4, 20, 2, 8), "int32", dims=("batch", *DIMS)),
                     tensor("input_ids", (4, 20), "int64")]
            w.hop(base + 200, "batcher", "reward", "rollout_batch", batch, step=s, items=items)
            for k in (0, 1):
                w.hop(base + 300 + k, "batcher", f"trainer/rank{k}", "micro_batch",
                      [tensor("indexer_topk", (2, 20, 2, 8), "int32", dims=("batch", *DIMS))],
                      step=s, transport="shm", items=items[2 * k: 2 * k + 2])
        if with_store:
            for k in (0, 1):
                w.hop(base + 400 + k, "replay_store", f"trainer/rank{k}", "replay",
                      [tensor("indexer_topk", (2, 20, 2, 8), "int32", dims=("batch", *DIMS))],
                      step=s, transport="shm", items=items[2 * k: 2 * k + 2])
    w.close(400_000)
    return str(path)


def _chains(found: list) -> list:
    return [f for f in found if f.kind == "pass_through" and "rides" in f.message]


def test_a_repacked_array_is_one_pass_through_along_the_chain(tmp_path: Path) -> None:
    found = findings(flowmap.load(_write(tmp_path)).view)
    (chain,) = _chains(found)
    assert found[0] == chain  # at stake: the bytes into both middles, more than any one seam
    assert "`indexer_topk` (tokens, layers, index_topk) rides rollout -> ready_buffer -> " \
           "batcher -> reward, trainer" in chain.message
    assert "ready_buffer and batcher a handle" in chain.message
    assert chain.seams == sorted([
        "batcher -> reward : rollout_batch", "batcher -> trainer/rank0 : micro_batch",
        "batcher -> trainer/rank1 : micro_batch", "ready_buffer -> batcher : samples",
        "rollout/0 -> ready_buffer : trajectory", "rollout/1 -> ready_buffer : trajectory"])
    one = 20 * 2 * 8 * 4  # one trajectory's indexer_topk
    assert chain.bytes_per_step == 4 * one + 4 * one  # into ready_buffer + into batcher
    assert chain.message.count(". ") == 0 and chain.message.endswith(".")


def test_a_chain_already_found_as_a_whole_payload_pass_through_is_not_repeated(
        tmp_path: Path) -> None:
    # the ranks read straight from a store: the only middle is replay_store, and the
    # whole-payload detector already names it (same leaf schema in and out)
    w = ShardWriter(str(tmp_path / "testhost-1-0001.flowmap.jsonl"), 1, "driver")
    for s in range(2):
        w.step(s * 1000 + 1, s)
        w.hop(s * 1000 + 10, "rollout/0", "replay_store", "replay",
              [tensor("[*].indexer_topk", (20, 2, 8), "int32", count=2, dims=DIMS)],
              step=s, transport="copy", items=["a", "b"])
        w.hop(s * 1000 + 20, "replay_store", "trainer/rank0", "replay",
              [tensor("[*].indexer_topk", (20, 2, 8), "int32", count=2, dims=DIMS)],
              step=s, transport="shm", items=["a", "b"])
    w.close(5_000)
    found = findings(flowmap.load(str(tmp_path)).view)
    assert not _chains(found)
    assert [f for f in found if f.kind == "pass_through" and "replay_store" in f.message]


def test_producer_to_consumer_alone_is_no_pass_through(tmp_path: Path) -> None:
    found = findings(flowmap.load(_write(tmp_path, repack=False)).view)
    assert not [f for f in found if f.kind == "pass_through"]
