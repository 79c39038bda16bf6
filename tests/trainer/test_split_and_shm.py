"""Steps 1-5 of the seven: padding, ordering, the DP split, micro-batches, the shared-memory pool."""

from __future__ import annotations

import pytest
import torch

from flowmap.trainer.batcher import collate
from flowmap.trainer.train import shm_pool
from flowmap.trainer.train.split import order_by_tokens, pad_to_divisible, snake_split, split_batch
from flowmap.trainer.tree import LeafTrajectory


def _leaf(i: int, prompt: int, response: int) -> LeafTrajectory:
    return LeafTrajectory(
        f"l{i}", f"t{i}", "u", [1] * prompt, [3 + i] * response, [1] * response,
        [-0.5] * response, [], [], [], 0,
    )


def test_padding_ordering_and_snake_split() -> None:
    assert pad_to_divisible(5, 4) == [0, 1, 2, 3, 4, 0, 0, 0]
    assert order_by_tokens([3, 9, 5, 9]) == [1, 3, 2, 0]
    assert snake_split([10, 11, 12, 13, 14, 15], 2) == [[10, 13, 14], [11, 12, 15]]


def test_split_batch_balances_ranks_and_trims_micro_batches() -> None:
    leaves = [_leaf(i, prompt=2 + i % 3, response=1 + i) for i in range(7)]
    batch = collate(leaves, pad_id=0)
    advantages = torch.ones(batch.batch_size, batch.response_length) * batch.response_mask
    shards = split_batch(batch, advantages, dp=2, micro_batches=2)
    assert shards.global_response_tokens == sum(1 + i for i in range(7))
    rows = [mb.input_ids.shape[0] for rank in shards.micro_batches for mb in rank]
    assert rows == [2, 2, 2, 2]  # 7 rows padded to 8, 2 ranks x 2 micro-batches
    ids = sorted(i for rank in shards.leaf_ids for mb in rank for i in mb)
    assert ids == sorted(x.leaf_id for x in leaves)  # the padding row carries no id
    # The padding row adds no trained token, and every real token is trained exactly once.
    assert sum(float(mb.response_mask.sum()) for r in shards.micro_batches for mb in r) == 28
    for rank in shards.micro_batches:
        for mb in rank:
            # trimmed: some row uses the first column and some row the last response column
            assert bool(mb.attention_mask[:, 0].any()) and bool(mb.response_mask[:, -1].any())
            R = mb.response_length  # trained tokens are real response tokens
            assert bool((mb.response_mask <= mb.attention_mask[:, -R:]).all())


def test_shared_memory_round_trip_is_a_view() -> None:
    slot = shm_pool.new_slot(1 << 12)
    a = torch.arange(6, dtype=torch.int64).view(2, 3)
    b = torch.tensor([0.5, -1.5], dtype=torch.float32)
    specs = shm_pool.write(slot, [("a", a), ("b", b)])
    assert all(s.offset % shm_pool.ALIGN_BYTES == 0 for s in specs)
    got = shm_pool.read(slot, specs)
    assert torch.equal(got["a"], a) and torch.equal(got["b"], b)
    assert got["a"].untyped_storage().data_ptr() == slot.untyped_storage().data_ptr()


def test_full_slot_says_which_setting_to_raise() -> None:
    with pytest.raises(ValueError, match="shm_slot_bytes"):
        shm_pool.write(shm_pool.new_slot(64), [("big", torch.zeros(100))])


def test_slot_pool_free_list() -> None:
    pool = shm_pool.SlotPool(2, 64)
    a, b = pool.acquire(), pool.acquire()
    with pytest.raises(RuntimeError):
        pool.acquire()
    pool.release(a)
    with pytest.raises(RuntimeError):
        pool.release(a)
    assert pool.acquire() == a and b != a
