"""Paged KV accounting: which physical block holds which tokens of which sequence.

The cache is a pool of `num_blocks` blocks of `block_size` token slots. Each
sequence owns a block table (block i holds its tokens [i*bs, (i+1)*bs)), so a
sequence only ever holds ceil(len / bs) blocks instead of a max-length slab.

Prefix caching: a full block whose K/V were computed is registered under a
hash chained over every token up to its end; a later sequence with the same
prefix (a multi-turn continuation, a preempted sequence coming back) shares it
(ref_count > 1) instead of recomputing. Freed blocks keep their contents and
hash until they are handed out again, oldest-freed first, so recently used
prefixes survive longest. Only full blocks are shared and full blocks are never
written again, so sharing needs no copy-on-write.

Invariant: every block is either free (ref_count 0, in the free list) or used
(ref_count = number of block tables that hold it), never both.
"""

from __future__ import annotations

from flowmap.trainer.engine.sequence import Sequence


class Block:
    __slots__ = ("block_id", "ref_count", "hash", "token_ids")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_count = 0
        self.hash: int | None = None  # set once the block is full and its K/V computed
        self.token_ids: tuple[int, ...] | None = None  # guards a hash hit against collisions


def chain_hash(prefix_hash: int, token_ids: tuple[int, ...]) -> int:
    """Hash of a block given the hash of everything before it: equal only for equal prefixes."""
    return hash((prefix_hash, token_ids))


class BlockManager:
    def __init__(
        self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True
    ) -> None:
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        # Insertion-ordered set: allocation takes the oldest-freed block (LRU for cached prefixes).
        self.free_block_ids: dict[int, None] = dict.fromkeys(range(num_blocks))
        self.hash_to_block_id: dict[int, int] = {}
        # Root of every hash chain; a new epoch orphans all chains computed before a reset.
        self.cache_epoch = 0

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    @property
    def num_used_blocks(self) -> int:
        return len(self.blocks) - len(self.free_block_ids)

    def num_blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    # -- admission -----------------------------------------------------------------

    def cached_prefix(self, seq: Sequence) -> list[int]:
        """Blocks that already hold this sequence's leading full blocks, in order.

        The block holding the last token is never matched: the step must compute
        at least that token to get logits to sample from.
        """
        if not self.enable_prefix_caching:
            return []
        hits: list[int] = []
        prefix_hash = self.cache_epoch
        bs = self.block_size
        for i in range((len(seq) - 1) // bs):
            tokens = tuple(seq.token_ids[i * bs : (i + 1) * bs])
            prefix_hash = chain_hash(prefix_hash, tokens)
            block_id = self.hash_to_block_id.get(prefix_hash)
            if block_id is None or self.blocks[block_id].token_ids != tokens:
                break
            hits.append(block_id)
        return hits

    def can_allocate(self, seq: Sequence) -> bool:
        hits = self.cached_prefix(seq)
        shared = sum(1 for b in hits if self.blocks[b].ref_count > 0)  # cost no free block
        return self.num_blocks_for(len(seq)) - shared <= self.num_free_blocks

    def allocate(self, seq: Sequence) -> None:
        """Give a waiting sequence blocks for all its tokens, reusing cached prefix blocks."""
        if seq.block_table:
            raise RuntimeError(f"{seq!r} already holds blocks")
        for block_id in self.cached_prefix(seq):
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self.free_block_ids[block_id]
            block.ref_count += 1
            assert block.hash is not None  # a cached prefix block is found by its hash
            seq.block_table.append(block_id)
            seq.block_hashes.append(block.hash)
        num_hits = len(seq.block_table)
        for _ in range(self.num_blocks_for(len(seq)) - num_hits):
            seq.block_table.append(self._take_free_block())
        seq.num_cached_tokens = num_hits * self.block_size

    def deallocate(self, seq: Sequence) -> None:
        """Return a sequence's blocks (finished, aborted or preempted); idempotent."""
        for block_id in reversed(
            seq.block_table
        ):  # tail first: it is the least likely to be shared
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free_block_ids[block_id] = None
        seq.block_table = []
        seq.block_hashes = []
        seq.num_cached_tokens = 0

    # -- decoding ------------------------------------------------------------------

    def _needs_new_block(self, seq: Sequence) -> bool:
        return len(seq.block_table) < self.num_blocks_for(len(seq))

    def can_append(self, seq: Sequence) -> bool:
        """Can the sequence's newest token get a slot (a fresh block when the last one is full)?"""
        return not self._needs_new_block(seq) or self.num_free_blocks > 0

    def may_append(self, seq: Sequence) -> None:
        if self._needs_new_block(seq):
            seq.block_table.append(self._take_free_block())

    def commit(self, seq: Sequence) -> None:
        """Register the sequence's blocks that became full and computed, so others can share them."""
        if not self.enable_prefix_caching:
            return
        bs = self.block_size
        for i in range(len(seq.block_hashes), seq.num_cached_tokens // bs):
            tokens = tuple(seq.token_ids[i * bs : (i + 1) * bs])
            prefix_hash = chain_hash(
                seq.block_hashes[-1] if seq.block_hashes else self.cache_epoch, tokens
            )
            block = self.blocks[seq.block_table[i]]
            block.hash, block.token_ids = prefix_hash, tokens
            self.hash_to_block_id[prefix_hash] = block.block_id  # newest copy wins
            seq.block_hashes.append(prefix_hash)

    def reset_prefix_cache(self) -> None:
        """Forget every cached prefix: the cache was released or the weights changed.

        Running sequences keep their blocks; their hash chains hang off the old
        epoch, so nothing they register later can match a new lookup.
        """
        self.cache_epoch += 1
        self.hash_to_block_id.clear()
        for block in self.blocks:
            block.hash = block.token_ids = None

    def _take_free_block(self) -> int:
        if not self.free_block_ids:
            raise RuntimeError("no free KV block; check can_allocate/can_append first")
        block_id = next(iter(self.free_block_ids))
        del self.free_block_ids[block_id]
        block = self.blocks[block_id]
        if block.hash is not None and self.hash_to_block_id.get(block.hash) == block_id:
            del self.hash_to_block_id[block.hash]  # its contents are about to be overwritten
        block.hash = block.token_ids = None
        block.ref_count = 1
        return block_id
