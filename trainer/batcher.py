"""Batch assembly: dry-run the version gaps, take the oldest complete groups, collate.

Assembling batch `b` starts training step `b`, which moves the weights to
version `b + 1`; every sample left waiting then ages by one. So before taking
anything, `plan_batch` computes, without touching the buffer, the gap
`batch_id - version_tag` of every waiting sample, group by group (GRPO needs
whole groups): a group whose oldest sample is beyond `max_staleness` is
dropped whole, with its trajectories still in rollout (they can only get
older), the oldest complete groups are taken first, and the work that would be
too old for the next batch, waiting or still in rollout, is counted (`at_risk`)
so the watermark can react before it is wasted.

`collate` turns the taken leaves into the tensors every later hop uses, with
verl's names and layout: prompts left-padded, responses right-padded. Leaves
that carry replay arrays (payload transport) get them collated alongside,
aligned with `input_ids`; leaves that carry handles pass one handle per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from flowmap.trainer.ready_buffer import GroupEntry
from flowmap.trainer.replay import REPLAY_DIMS, Replay, ReplayHandle, batch_replay
from flowmap.trainer.replay_field import ReplayField
from flowmap.trainer.tree import LeafTrajectory

# Dimension names of a batch's replay leaves: rows, then the per-sequence dims.
BATCH_REPLAY_DIMS = {name: ("batch", *dims) for name, dims in REPLAY_DIMS.items()}


@dataclass(slots=True)
class BatchPlan:
    """The outcome of a dry run: what would be taken and dropped for `batch_id`."""

    batch_id: int
    take: list[str]  # uids, oldest first; empty when there are not enough complete groups
    drop_groups: list[str]  # uids of groups too old to train whole: dropped whole
    drop: list[str]  # the leaf ids of those groups that are waiting
    drop_in_rollout: int  # trajectories of those groups still in rollout (refused on arrival)
    max_gap: int  # largest gap among the samples taken (-1 when nothing is taken)
    # Work left waiting that would be too stale for batch_id + 1: its samples waiting plus
    # its trajectories still in rollout (the whole group goes when its oldest sample does).
    at_risk: int

    @property
    def ready(self) -> bool:
        return bool(self.take)


def plan_batch(
    groups: list[GroupEntry], batch_id: int, max_staleness: int, groups_per_batch: int
) -> BatchPlan:
    """A pure dry run over the buffer's groups (complete or not, with what is in rollout).

    A group's age is its oldest sample's tag: a group whose oldest sample is
    beyond `max_staleness` can never train whole and is dropped whole; of the
    complete groups left, the oldest `groups_per_batch` are taken.
    """
    dropped: list[GroupEntry] = []
    candidates: list[GroupEntry] = []
    for g in groups:
        if g.samples and batch_id - g.oldest_tag > max_staleness:
            dropped.append(g)
        elif g.complete and g.samples:
            candidates.append(g)
    candidates.sort(key=lambda g: (g.oldest_tag, g.first_seq))
    taken = candidates[:groups_per_batch] if len(candidates) >= groups_per_batch else []
    gone = {g.uid for g in taken} | {g.uid for g in dropped}
    at_risk = sum(
        len(g.samples) + g.in_rollout
        for g in groups
        if g.uid not in gone and g.samples and batch_id + 1 - g.oldest_tag > max_staleness
    )
    gaps = [batch_id - s.version_tag for g in taken for s in g.samples]
    return BatchPlan(
        batch_id, [g.uid for g in taken], [g.uid for g in dropped],
        [s.leaf_id for g in dropped for s in g.samples], sum(g.in_rollout for g in dropped),
        max(gaps, default=-1), at_risk,
    )


@dataclass  # not slotted: see replay_field.py
class RolloutBatch:
    """One row per leaf trajectory (batcher -> reward, and what the advantage is added to)."""

    prompts: Tensor  # (B, P) int64, left-padded
    responses: Tensor  # (B, R) int64, right-padded
    response_mask: Tensor  # (B, R) float32: 1 on tokens trained on
    input_ids: Tensor  # (B, P + R) prompts then responses
    attention_mask: Tensor  # (B, P + R) int64: 1 = real token
    position_ids: Tensor  # (B, P + R) int64: real tokens counted from 0
    rollout_log_probs: Tensor  # (B, R) float32: behaviour log-probs, 0 off the model's turns
    version_tags: Tensor  # (B,) int64: weight version at registration
    uid: list[str]  # GRPO group of each row
    leaf_ids: list[str]
    turn_outputs: list[list[list[int]]]  # per row, per model turn: generated tokens (verifier input)
    expected: list[list[str]]  # per row, per model turn: the ground truth
    # Payload transport: the arrays collated like `input_ids` ((B, P + R, L, k) int32, -1
    # where not recorded); handle transport: the store entry of each row's arrays, (B,).
    replay: ReplayField[list[ReplayHandle | None]] = ReplayField("replay_handles")

    @property
    def batch_size(self) -> int:
        return self.input_ids.shape[0]

    @property
    def response_length(self) -> int:
        return self.responses.shape[1]


def collate(leaves: list[LeafTrajectory], pad_id: int) -> RolloutBatch:
    """Stack leaves into padded tensors (left-pad prompts, right-pad responses)."""
    B = len(leaves)
    P = max(len(x.prompt_token_ids) for x in leaves)
    R = max(len(x.response_token_ids) for x in leaves)
    prompts = torch.full((B, P), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros(B, P, dtype=torch.long)
    responses = torch.full((B, R), pad_id, dtype=torch.long)
    response_real = torch.zeros(B, R, dtype=torch.long)
    response_mask = torch.zeros(B, R)
    logprobs = torch.zeros(B, R)
    for i, x in enumerate(leaves):
        p, r = len(x.prompt_token_ids), len(x.response_token_ids)
        prompts[i, P - p :] = torch.tensor(x.prompt_token_ids)
        prompt_mask[i, P - p :] = 1
        responses[i, :r] = torch.tensor(x.response_token_ids)
        response_real[i, :r] = 1
        response_mask[i, :r] = torch.tensor(x.response_mask, dtype=torch.float32)
        logprobs[i, :r] = torch.tensor(x.rollout_log_probs)
    attention_mask = torch.cat([prompt_mask, response_real], dim=1)  # (B, P + R)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    batch = RolloutBatch(
        prompts=prompts,
        responses=responses,
        response_mask=response_mask,
        input_ids=torch.cat([prompts, responses], dim=1),
        attention_mask=attention_mask,
        position_ids=position_ids,
        rollout_log_probs=logprobs,
        version_tags=torch.tensor([x.version_tag for x in leaves]),
        uid=[x.uid for x in leaves],
        leaf_ids=[x.leaf_id for x in leaves],
        turn_outputs=[x.turn_outputs for x in leaves],
        expected=[x.expected for x in leaves],
    )
    return _with_replay(batch, leaves)


def _with_replay(batch: RolloutBatch, leaves: list[LeafTrajectory]) -> RolloutBatch:
    """The batch with its leaves' replay arrays collated, or their handles, if they carry any."""
    replays = [x.replay for x in leaves]
    if any(isinstance(r, Replay) for r in replays):
        batch.replay = batch_replay([r if isinstance(r, Replay) else None for r in replays],
                                    batch.attention_mask)
    elif any(isinstance(r, ReplayHandle) for r in replays):
        batch.replay = [r if isinstance(r, ReplayHandle) else None for r in replays]
    return batch
