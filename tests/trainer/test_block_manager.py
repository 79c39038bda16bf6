"""The block manager never leaks or double-books a KV block.

Property tests drive it with random request mixes, alone and under the
scheduler (with a fake sampler, no model), and check after every operation
that the free list and the allocated blocks partition the pool.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from flowmap.trainer.engine.block_manager import BlockManager
from flowmap.trainer.engine.config import EngineConfig
from flowmap.trainer.engine.sampling import SamplingParams
from flowmap.trainer.engine.scheduler import Scheduler
from flowmap.trainer.engine.sequence import Sequence


def assert_pool_partitioned(bm: BlockManager, live: list[Sequence]) -> None:
    """Free list and used blocks partition the pool; ref counts equal block-table occurrences."""
    holders: list[list[tuple[Sequence, int]]] = [[] for _ in range(bm.num_blocks)]
    for seq in live:
        assert len(set(seq.block_table)) == len(seq.block_table), f"{seq!r} holds a block twice"
        for index, block_id in enumerate(seq.block_table):
            holders[block_id].append((seq, index))
    free = set(bm.free_block_ids)
    assert len(free) == len(bm.free_block_ids)
    for block in bm.blocks:
        assert block.ref_count == len(holders[block.block_id]), block.block_id
        assert (block.ref_count == 0) == (block.block_id in free), block.block_id
        if block.ref_count > 1:  # shared: must be full and computed in every holder, never written
            assert all(i < len(seq.block_hashes) for seq, i in holders[block.block_id])
    for h, block_id in bm.hash_to_block_id.items():
        assert bm.blocks[block_id].hash == h


def test_equal_prefixes_share_full_blocks_and_free_them_once() -> None:
    bm = BlockManager(num_blocks=8, block_size=4)
    a = Sequence(0, "a", list(range(10)), SamplingParams())
    bm.allocate(a)  # 3 blocks: [0..3] [4..7] [8, 9]
    a.num_cached_tokens = len(a)
    bm.commit(a)
    b = Sequence(1, "b", list(range(9)) + [42], SamplingParams())
    assert bm.can_allocate(b)
    bm.allocate(b)
    assert b.block_table[:2] == a.block_table[:2] and b.num_cached_tokens == 8
    assert b.block_table[2] != a.block_table[2]
    assert_pool_partitioned(bm, [a, b])
    bm.deallocate(a)
    bm.deallocate(b)
    bm.deallocate(b)  # idempotent
    assert bm.num_free_blocks == 8
    assert_pool_partitioned(bm, [])


def test_the_last_token_is_always_computed_even_on_a_full_prefix_hit() -> None:
    bm = BlockManager(num_blocks=8, block_size=4)
    a = Sequence(0, "a", list(range(8)), SamplingParams())
    bm.allocate(a)
    a.num_cached_tokens = 8
    bm.commit(a)
    again = Sequence(1, "again", list(range(8)), SamplingParams())
    bm.allocate(again)
    assert again.num_cached_tokens == 4 and again.num_new_tokens == 4


def test_reset_prefix_cache_orphans_old_chains() -> None:
    bm = BlockManager(num_blocks=8, block_size=4)
    a = Sequence(0, "a", list(range(6)), SamplingParams())
    bm.allocate(a)
    a.num_cached_tokens = 6
    bm.commit(a)
    bm.reset_prefix_cache()
    a.token_ids += [6, 7, 8]
    bm.may_append(a)
    a.num_cached_tokens = 9
    bm.commit(a)  # registers [4..7] on the old chain
    b = Sequence(1, "b", list(range(10)), SamplingParams())
    assert bm.cached_prefix(b) == []


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["new", "append", "append", "free", "preempt", "reset"]),
            st.integers(0, 10**6),
        ),
        min_size=1,
        max_size=60,
    ),
    block_size=st.sampled_from([1, 2, 4]),
    num_blocks=st.integers(1, 12),
)
def test_random_op_mixes_never_leak_or_double_book(
    ops: list[tuple[str, int]], block_size: int, num_blocks: int
) -> None:
    bm = BlockManager(num_blocks, block_size)
    running: list[Sequence] = []
    preempted: list[Sequence] = []
    for step, (op, r) in enumerate(ops):
        rng = random.Random(r)
        if op == "new":
            # A small alphabet and shared stems make prefix hits common.
            prompt = [rng.choice([1, 2]) for _ in range(rng.randint(1, 3 * block_size))]
            seq = Sequence(step, f"s{step}", prompt, SamplingParams())
            (preempted if not bm.can_allocate(seq) else running).append(seq)
            if seq in running:
                bm.allocate(seq)
        elif op == "append" and running:
            seq = running[r % len(running)]
            seq.num_cached_tokens = len(seq)  # the step computed every token so far
            bm.commit(seq)
            seq.token_ids.append(rng.choice([1, 2]))
            if bm.can_append(seq):
                bm.may_append(seq)
                assert len(seq.block_table) == bm.num_blocks_for(len(seq))
            else:
                bm.deallocate(seq)
                running.remove(seq)
                preempted.append(seq)
        elif op == "free" and running:
            bm.deallocate(running.pop(r % len(running)))
        elif op == "preempt" and running:
            seq = running.pop(r % len(running))
            bm.deallocate(seq)
            preempted.append(seq)
            again = preempted.pop(0)
            if bm.can_allocate(again):
                bm.allocate(again)
                running.append(again)
            else:
                preempted.append(again)
        elif op == "reset":  # weights changed: cached prefixes are void, held blocks stay
            bm.reset_prefix_cache()
        assert_pool_partitioned(bm, running + preempted)
    for seq in running:
        bm.deallocate(seq)
    assert bm.num_free_blocks == num_blocks
    assert_pool_partitioned(bm, [])


@settings(max_examples=60, deadline=None)
@given(
    requests=st.lists(
        st.tuples(st.integers(1, 10), st.integers(1, 12), st.integers(0, 3)),
        min_size=1,
        max_size=12,
    ),
    num_kv_blocks=st.integers(7, 16),
    max_num_seqs=st.integers(1, 6),
    seed=st.integers(0, 1000),
)
def test_scheduler_under_random_workloads_returns_every_block(
    requests: list[tuple[int, int, int]], num_kv_blocks: int, max_num_seqs: int, seed: int
) -> None:
    # GIVEN a pool so small that requests queue and preempt each other
    config = EngineConfig(
        num_kv_blocks=num_kv_blocks,
        block_size=4,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=32,
    )
    bm = BlockManager(config.num_kv_blocks, config.block_size)
    scheduler = Scheduler(config, bm, max_seq_len=64)
    rng = random.Random(seed)
    pending = [
        Sequence(i, f"r{i}", [rng.choice([3, 4]) for _ in range(p)], SamplingParams(max_tokens=m))
        for i, (p, m, _) in enumerate(requests)
    ]
    arrival = {i: a for i, (_, _, a) in enumerate(requests)}
    finished: list[Sequence] = []
    # WHEN requests arrive over time and a fake sampler emits tokens
    for step in range(500):
        for seq in [s for s in pending if arrival[s.seq_id] <= step]:
            pending.remove(seq)
            scheduler.add(seq)
        if not pending and not scheduler.num_unfinished_seqs:
            break
        batch = scheduler.schedule()
        assert len(batch) <= max_num_seqs
        assert sum(s.num_new_tokens for s in batch) <= config.max_num_batched_tokens
        for seq in batch:
            assert len(seq.block_table) == bm.num_blocks_for(len(seq))
        finished += scheduler.postprocess(
            batch, [rng.choice([3, 4]) for _ in batch], [0.0] * len(batch)
        )
        # THEN at every step the pool is partitioned between free list and live block tables
        assert_pool_partitioned(bm, [*scheduler.running, *scheduler.waiting])
    # THEN everyone finished with exactly max_tokens tokens and every block came back
    assert len(finished) == len(requests)
    for seq in finished:
        assert seq.num_output_tokens == seq.params.max_tokens and seq.block_table == []
    assert bm.num_free_blocks == num_kv_blocks
