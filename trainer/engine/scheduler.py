"""Continuous batching: which sequences compute in the next step.

Every step first advances the running sequences by one token each (oldest
first), then admits waiting sequences for prefill into the same step while the
sequence and token budgets and free KV blocks allow: prefill and decode share
one forward pass, and a finished sequence's slot is refilled the next step
instead of idling until its batch ends.

When a running sequence needs a new block and none is free, the newest running
sequence is preempted by recompute: its blocks are freed and it goes back to
the front of the waiting queue with its tokens, to be prefilled again later
(cheaply, when its full blocks are still in the prefix cache).
"""

from __future__ import annotations

from collections import deque

from flowmap.trainer.engine.block_manager import BlockManager
from flowmap.trainer.engine.config import EngineConfig
from flowmap.trainer.engine.sequence import Sequence, SequenceStatus


class Scheduler:
    def __init__(self, config: EngineConfig, block_manager: BlockManager, max_seq_len: int) -> None:
        self.max_num_seqs = config.max_num_seqs
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.max_seq_len = max_seq_len
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: deque[Sequence] = deque()
        self.num_preemptions = 0

    @property
    def num_unfinished_seqs(self) -> int:
        return len(self.waiting) + len(self.running)

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def schedule(self) -> list[Sequence]:
        """The sequences of the next step: running ones (decode) first, then admitted ones (prefill)."""
        scheduled, preempted = self._schedule_running()
        if not preempted:  # blocks just ran out: admitting now would only churn
            scheduled += self._admit_waiting(sum(s.num_new_tokens for s in scheduled))
        return scheduled

    def _schedule_running(self) -> tuple[list[Sequence], bool]:
        scheduled: list[Sequence] = []
        preempted = False
        while self.running:
            seq = self.running.popleft()
            while not self.block_manager.can_append(seq):
                preempted = True
                if self.running:
                    self._preempt(self.running.pop())  # the newest gives way
                else:
                    self._preempt(seq)
                    break
            else:
                self.block_manager.may_append(seq)
                scheduled.append(seq)
        self.running.extend(scheduled)
        return scheduled, preempted

    def _admit_waiting(self, num_batched_tokens: int) -> list[Sequence]:
        admitted: list[Sequence] = []
        bm = self.block_manager
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            num_new_tokens = len(seq) - len(bm.cached_prefix(seq)) * bm.block_size
            if num_batched_tokens + num_new_tokens > self.max_num_batched_tokens:
                break
            if not bm.can_allocate(seq):
                break  # first come, first served: no overtaking the head of the queue
            self.waiting.popleft()
            bm.allocate(seq)
            seq.status = SequenceStatus.RUNNING
            num_batched_tokens += seq.num_new_tokens
            self.running.append(seq)
            admitted.append(seq)
        return admitted

    def _preempt(self, seq: Sequence) -> None:
        self.block_manager.deallocate(seq)
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

    def postprocess(
        self, seqs: list[Sequence], token_ids: list[int], logprobs: list[float]
    ) -> list[Sequence]:
        """Record each sequence's new token; return those that finished (their blocks freed)."""
        finished: list[Sequence] = []
        for seq, token_id, logprob in zip(seqs, token_ids, logprobs, strict=True):
            seq.num_cached_tokens = len(seq)  # every token up to here now has K/V in the cache
            self.block_manager.commit(seq)
            seq.append_token(token_id, logprob)
            reason = self._finish_reason(seq, token_id)
            if reason is not None:
                seq.finish_reason = reason
                finished.append(seq)
        for seq in finished:
            self.remove(seq)
            seq.status = SequenceStatus.FINISHED
        return finished

    def _finish_reason(self, seq: Sequence, token_id: int) -> str | None:
        if token_id in seq.params.stop_token_ids:
            return "stop"
        if seq.num_output_tokens >= seq.params.max_tokens or len(seq) >= self.max_seq_len:
            return "length"
        return None

    def remove(self, seq: Sequence) -> None:
        """Take a sequence out of whichever queue holds it and free its blocks."""
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        elif seq.status is SequenceStatus.WAITING:
            self.waiting.remove(seq)
        self.block_manager.deallocate(seq)

    def withdraw_all(self) -> list[Sequence]:
        """Every unfinished sequence, in arrival order, out of the queues with its blocks freed."""
        seqs = sorted([*self.running, *self.waiting], key=lambda s: s.seq_id)
        for seq in seqs:
            self.block_manager.deallocate(seq)
            seq.status = SequenceStatus.WAITING
        self.running.clear()
        self.waiting.clear()
        return seqs

    def preempt_all_running(self) -> None:
        """Send every running sequence back to waiting for recompute (the cache is going away)."""
        while self.running:
            self._preempt(self.running.pop())
