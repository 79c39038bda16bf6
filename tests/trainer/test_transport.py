"""Replay transports, without processes: what each leaf, batch and micro-batch carries.

GIVEN a forked multi-turn trajectory whose turns recorded MoE/DSA selections
WHEN its leaves travel by payload or by handle through collate and the split
THEN each leaf's rows are its path's turns folded (earlier rows win), every
micro-batch replays exactly the same tensors either way (padding rows too), the
handle path carries no arrays, and the store's entries are freed when their
step is reported, when their leaf is dropped, and at close — with the drop in
the trace under `replay_store`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import flowmap
from flowmap.capture.describe import describe
from flowmap.trainer.batcher import collate
from flowmap.trainer.config import ConfigError, build, parse_args
from flowmap.trainer.replay import SHM_DIR, Replay, ReplayHandle, fetch_batch
from flowmap.trainer.replay_transport import Dense, Handle, Payload, make_transport
from flowmap.trainer.train.split import (
    MICRO_BATCH_FIELDS,
    micro_batch_from,
    split_batch,
)
from flowmap.trainer.tree import (
    LeafTrajectory,
    TrajectoryTree,
    flatten,
    leaf_replays,
)

L, K_MOE, K_DSA = 2, 2, 4  # layers, moe_top_k, dsa_index_topk



def rows(n: int, tag: int) -> Replay:
    """n rows whose values say which turn recorded them (tag) and at which position (row)."""
    pos = torch.arange(n, dtype=torch.int32)[:, None, None]  # (n, 1, 1)
    return Replay(
        (tag * 1000 + pos).expand(n, L, K_MOE).contiguous(),
        (tag * 1000 + pos).expand(n, L, K_DSA).contiguous(),
    )


def forked_tree(traj: str, uid: str) -> TrajectoryTree:
    """prompt(3) -> turn A(2) -> fork: [env(3) -> turn B(2)] and [env(2) -> turn C(2)].

    Each turn's rows start at position 0 (its request had the whole context as
    prompt): A has 3+2-1 = 4 rows, B 3+2+3+2-1 = 9, C 3+2+2+2-1 = 8.
    """
    t = TrajectoryTree(traj, uid, [1, 2, 3])
    a = t.add(None, traj, [4, 5], generated=True, logprobs=[-0.1, -0.2], expected="5",
              replay=rows(4, 1))
    e0 = t.add(a, traj, [6, 7, 8], generated=False)
    e1 = t.add(a, f"{traj}~1", [9, 10], generated=False)
    t.add(e0, traj, [11, 12], generated=True, logprobs=[-0.3, -0.4], expected="2",
          replay=rows(9, 2))
    t.add(e1, f"{traj}~1", [13, 14], generated=True, logprobs=[-0.5, -0.6], expected="4",
          replay=rows(8, 3))
    return t


def leaves_and_replays() -> tuple[list[LeafTrajectory], list[Replay | None]]:
    trees = [forked_tree("g0-t0", "u0"), forked_tree("g0-t1", "u0")]
    leaves = [x for t in trees for x in flatten(t)]
    replays = [r for t in trees for r in leaf_replays(t)]
    leaves[1].version_tag = 0
    return leaves[:3], replays[:3]  # 3 rows: the split pads them to 4


def test_a_leaf_folds_its_path_turns_and_earlier_rows_win() -> None:
    first, second = leaf_replays(forked_tree("g0-t0", "u0"))
    assert first is not None and second is not None
    seq_len = [len(x.prompt_token_ids) + len(x.response_token_ids)
               for x in flatten(forked_tree("g0-t0", "u0"))]
    assert first.indexer_topk is not None and second.indexer_topk is not None
    assert [len(first.indexer_topk), len(second.indexer_topk)] == [n - 1 for n in seq_len]
    # rows 0-3 from turn A (tag 1), the rest from the leaf's own second turn
    assert first.indexer_topk[:, 0, 0].tolist() == [1000, 1001, 1002, 1003,
                                                   2004, 2005, 2006, 2007, 2008]
    assert second.indexer_topk[:, 0, 0].tolist() == [1000, 1001, 1002, 1003,
                                                    3004, 3005, 3006, 3007]
    assert first.routed_experts is not None and first.routed_experts.shape == (9, L, K_MOE)


def test_payload_and_handle_micro_batches_replay_the_same_tensors() -> None:
    leaves, replays = leaves_and_replays()
    payload = collate(Payload().attach(0, leaves, replays), pad_id=0)
    handle_transport = Handle()
    try:
        handled = collate(handle_transport.attach(0, leaves, replays), pad_id=0)
        assert isinstance(payload.replay, Replay)
        assert isinstance(handled.replay, list) and len(handled.replay) == 3
        advantages = torch.randn(3, payload.response_length)
        by_payload = split_batch(payload, advantages, dp=2, micro_batches=2)
        by_handle = split_batch(handled, advantages, dp=2, micro_batches=2)
        assert by_handle.replay_handles is not None and by_payload.replay_handles is None
        checked = 0
        for rank in range(2):
            for m, (a, b) in enumerate(zip(by_payload.micro_batches[rank],
                                           by_handle.micro_batches[rank], strict=True)):
                assert isinstance(a.replay, Replay) and b.replay is None
                for f in MICRO_BATCH_FIELDS:
                    assert torch.equal(getattr(a, f), getattr(b, f))
                handles = by_handle.replay_handles[rank][m]
                assert len(handles) == a.input_ids.shape[0]  # padding rows have one too
                fetched = fetch_batch(handles, b.attention_mask)
                expected = a.replay
                assert torch.equal(fetched.routed_experts, expected.routed_experts)
                assert torch.equal(fetched.indexer_topk, expected.indexer_topk)
                checked += 1
        assert checked == 4
    finally:
        handle_transport.close()


def test_the_rank_rebuilds_each_kind_of_micro_batch_from_its_slot() -> None:
    leaves, replays = leaves_and_replays()
    batch = collate(Payload().attach(0, leaves, replays), pad_id=0)
    shards = split_batch(batch, torch.zeros(3, batch.response_length), dp=1, micro_batches=1)
    (mb,) = shards.micro_batches[0]
    views = {f"0.{k}": t for k, t in mb.tensors()}
    assert set(views) == {f"0.{f}" for f in (*MICRO_BATCH_FIELDS, "routed_experts",
                                            "indexer_topk")}
    assert isinstance(micro_batch_from(views, 0).replay, Replay)
    base = {k: t for k, t in views.items() if k.removeprefix("0.") in MICRO_BATCH_FIELDS}
    assert micro_batch_from(base, 0).replay is None
    with_handles = micro_batch_from(base, 0, [None] * 4)
    assert with_handles.replay == [None] * 4


def test_the_handle_path_carries_no_arrays_and_a_few_hundred_bytes_per_leaf() -> None:
    leaves, replays = leaves_and_replays()
    transport = Handle()
    try:
        handled = transport.attach(0, leaves, replays)
        assert all(isinstance(x.replay, ReplayHandle) for x in handled)
        for payload in (handled, collate(handled, pad_id=0)):
            d = describe(payload)
            assert not [leaf for leaf in d.leaves
                        if leaf[1] == "tensor" and ("indexer" in leaf[0] or "expert" in leaf[0])]
        per_leaf = sum(leaf[5] for leaf in describe(handled).leaves
                       if "replay_handle" in leaf[0]) / len(handled)
        assert 0 < per_leaf <= 4096
    finally:
        transport.close()


def test_a_dense_model_travels_exactly_as_before() -> None:
    leaves, _ = leaves_and_replays()
    transport = make_transport("handle", has_replay=False)
    assert type(transport) is Dense and transport.attach(0, leaves, [None] * 3) is leaves
    batch = collate(leaves, pad_id=0)
    assert batch.replay is None and "routed_experts" not in vars(batch)
    (mb,) = split_batch(batch, torch.zeros(3, batch.response_length), 1, 1).micro_batches[0]
    assert mb.replay is None and [k for k, _ in mb.tensors()] == list(MICRO_BATCH_FIELDS)
    assert [leaf[0] for leaf in describe(mb).leaves] == list(MICRO_BATCH_FIELDS)
    assert not any("replay" in leaf[0] for leaf in describe(leaves).leaves)


@pytest.mark.skipif(not SHM_DIR.is_dir(), reason="segments are checked in /dev/shm")
def test_store_entries_are_freed_when_consumed_dropped_or_closed(tmp_path: Path) -> None:
    leaves, replays = leaves_and_replays()
    transport = Handle()
    name = transport.store.name
    with flowmap.tracing(str(tmp_path / "run"), children=False) as path:
        with flowmap.owner("driver"):
            a = transport.attach(0, leaves[:2], replays[:2])
            b = transport.attach(1, leaves[2:], replays[2:])
        assert len(transport.store.live_entries) == 3
        assert len(list(SHM_DIR.glob(f"{name}_*"))) == 3
        # a stale leaf is dropped: its entry goes at once
        transport.dropped(b, "stale")
        assert sorted(transport.store.live_entries.values()) == ["g0-t0", "g0-t0~1"]
        # a batch is submitted: its entries stay until every rank has reported the step
        transport.submitted(7, a[:1])
        transport.step_done(6)  # another step: nothing of this batch is freed
        assert len(transport.store.live_entries) == 2
        transport.step_done(7)
        assert list(transport.store.live_entries.values()) == ["g0-t0~1"]
        transport.close()  # what is left (still waiting at the end of the run)
    assert transport.store.live_entries == {} and transport.store.live_bytes == 0
    assert list(SHM_DIR.glob(f"{name}_*")) == []
    run = flowmap.load(path)
    assert [(d.owner, d.reason, list(d.items)) for d in run.drops] == [
        ("replay_store", "stale", [leaves[2].leaf_id])]
    puts = {h.src: h for h in run.hops if h.dst == "replay_store"}
    assert set(puts) == {"rollout/0", "rollout/1"} and puts["rollout/0"].transport == "copy"
    assert {leaf.dims for h in puts.values() for leaf in h.leaves} == {
        ("tokens", "layers", "topk"), ("tokens", "layers", "index_topk")}
    assert run.counters["replay_store_entries"].last == 0
    assert run.counters["replay_store_bytes"].last == 0


def test_the_transport_flag_and_its_one_sentence_error() -> None:
    assert build().rollout.transport == "payload"
    assert parse_args(["--transport", "handle"]).rollout.transport == "handle"
    with pytest.raises(SystemExit):
        parse_args(["--transport", "pigeon"])
    with pytest.raises(ConfigError, match="rollout.transport must be one of payload, handle"):
        build({"rollout.transport": "pigeon"})
    cfg = parse_args(["--steps", "3"], defaults={"model.dsa_index_topk": 8, "train.steps": 9})
    assert cfg.model.has_replay and cfg.train.steps == 3
    assert not build().model.has_replay
    with pytest.raises(ConfigError, match="moe_top_k"):
        build({"model.moe_experts": 2, "model.moe_top_k": 3})


def test_a_leaf_with_replay_describes_its_fields_then_the_arrays() -> None:
    leaves, replays = leaves_and_replays()
    wrapped = Payload().attach(0, leaves, replays)[0]
    assert isinstance(wrapped.replay, Replay) and leaves[0].replay is None
    paths = [leaf[0] for leaf in describe(wrapped).leaves]
    assert paths[: len(paths) - 2] == [leaf[0] for leaf in describe(leaves[0]).leaves]
    assert paths[-2:] == ["routed_experts", "indexer_topk"]
