"""Steps 1, 2, 3 and 5: pad to divisible, reorder by token count, split across ranks, micro-batch.

1. Rows are padded up to a multiple of `dp * micro_batches` with copies of a
   real row whose response mask and advantages are zero (verl's
   `pad_dataproto_to_divisor`): they keep every split the same size and add
   nothing to the loss.
2. Rows are ordered by their number of real tokens, longest first.
3. The ordered rows are dealt to the ranks in snake order (0,1,1,0,0,1,...),
   so each rank gets the same number of rows and nearly the same tokens.
5. Each rank's rows, still ordered, are cut into micro-batches, and each
   micro-batch is trimmed to its own longest prompt and response: similar
   lengths sit together, so little compute goes to padding.

Replay (MoE/DSA): with the payload transport the batch's replay arrays are cut
like `input_ids` and travel in the micro-batch; with the handle transport only
each row's handle goes to the rank (padding rows repeat their source row's),
and the rank fetches the arrays itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from flowmap.trainer.batcher import RolloutBatch
from flowmap.trainer.replay import Replay, ReplayHandle
from flowmap.trainer.replay_field import ARRAY_NAMES, ReplayField

MICRO_BATCH_FIELDS = (
    "input_ids",
    "attention_mask",
    "position_ids",
    "response_mask",
    "rollout_log_probs",
    "advantages",
)


@dataclass  # not slotted: see replay_field.py
class MicroBatch:
    """What one forward/backward pass of one rank consumes (batcher -> trainer/rank<k>)."""

    input_ids: Tensor  # (b, P' + R') int64
    attention_mask: Tensor  # (b, P' + R') int64
    position_ids: Tensor  # (b, P' + R') int64
    response_mask: Tensor  # (b, R') float32
    rollout_log_probs: Tensor  # (b, R') float32
    advantages: Tensor  # (b, R') float32

    # Payload transport: the arrays, cut like `input_ids` ((b, P' + R', L, k) int32); handle
    # transport, as the rank sees it: the store entry of each row (padding rows repeat one).
    replay: ReplayField[list[ReplayHandle | None]] = ReplayField("replay_handles")

    @property
    def response_length(self) -> int:
        return self.response_mask.shape[1]

    def tensors(self) -> list[tuple[str, Tensor]]:
        """What goes into the rank's shared-memory slot: the tensors, then the replay arrays."""
        out = [(f, getattr(self, f)) for f in MICRO_BATCH_FIELDS]
        replay = self.replay
        return out + list(replay.arrays().items()) if isinstance(replay, Replay) else out


@dataclass(slots=True)
class RankShards:
    """The whole batch, split: micro_batches[rank][m], with the leaf ids of each."""

    micro_batches: list[list[MicroBatch]]
    leaf_ids: list[list[list[str]]]  # [rank][m] -> ids of the real rows ("" rows are padding)
    global_response_tokens: int  # the loss denominator shared by every rank and micro-batch
    # Handle transport: [rank][m][row] the store entry of each row, padding rows included.
    replay_handles: list[list[list[ReplayHandle | None]]] | None = None
    # [rank][m] -> per-row (b, R') tensors from other owners, cut like the responses
    # (the reference model's `ref_log_probs`); they travel in the same slot.
    extras: list[list[dict[str, Tensor]]] = field(default_factory=list)
    # Mini-batch k is micro-batches [k * m/M, (k + 1) * m/M) of every rank; its loss
    # denominator is its global count of response tokens (one entry per mini-batch).
    mini_batch_tokens: list[int] = field(default_factory=list)


def pad_to_divisible(num_rows: int, divisor: int) -> list[int]:
    """Source row of every row after padding: 0..B-1, then copies of row 0 (masked out)."""
    padded = -(-num_rows // divisor) * divisor
    return list(range(num_rows)) + [0] * (padded - num_rows)


def order_by_tokens(token_counts: list[int]) -> list[int]:
    """Row positions, most real tokens first (stable)."""
    return sorted(range(len(token_counts)), key=lambda i: -token_counts[i])


def snake_split(ordered: list[int], dp: int) -> list[list[int]]:
    """Deal ordered rows to `dp` ranks 0..dp-1, dp-1..0, ... (balanced count and tokens)."""
    ranks: list[list[int]] = [[] for _ in range(dp)]
    for i, row in enumerate(ordered):
        lap, pos = divmod(i, dp)
        ranks[pos if lap % 2 == 0 else dp - 1 - pos].append(row)
    return ranks


def split_batch(
    batch: RolloutBatch, advantages: Tensor, dp: int, micro_batches: int,
    mini_batches: int = 1, per_row: dict[str, Tensor] | None = None,
) -> RankShards:
    """Steps 1-3 and 5 for the whole batch; `per_row` (B, R) tensors are cut alongside."""
    source = pad_to_divisible(batch.batch_size, dp * micro_batches)  # step 1
    is_pad = [i >= batch.batch_size for i in range(len(source))]
    tokens = batch.attention_mask.sum(-1).tolist()
    ordered = order_by_tokens([tokens[s] for s in source])  # step 2
    per_rank = snake_split(ordered, dp)  # step 3
    out: list[list[MicroBatch]] = []
    ids: list[list[list[str]]] = []
    handles: list[list[list[ReplayHandle | None]]] = []
    for rows in per_rank:
        chunks = _chunks(rows, micro_batches)  # step 5
        out.append([_micro_batch(batch, advantages, [source[r] for r in c], [is_pad[r] for r in c])
                    for c in chunks])
        ids.append([[batch.leaf_ids[source[r]] for r in c if not is_pad[r]] for c in chunks])
        if isinstance(batch.replay, list):
            row_handles = batch.replay
            handles.append([[row_handles[source[r]] for r in c] for c in chunks])
    extras = [[{k: t[torch.tensor([source[r] for r in c])][:, : mb.response_length].contiguous()
                for k, t in (per_row or {}).items()}
               for c, mb in zip(_chunks(rows, micro_batches), mbs, strict=True)]
              for rows, mbs in zip(per_rank, out, strict=True)]
    per_mini = micro_batches // mini_batches
    mini_tokens = [int(sum(mb.response_mask.sum().item() for mbs in out
                           for mb in mbs[k * per_mini : (k + 1) * per_mini]))
                   for k in range(mini_batches)]
    return RankShards(out, ids, int(batch.response_mask.sum().item()),
                      handles if isinstance(batch.replay, list) else None,
                      extras, mini_tokens)


def _chunks(rows: list[int], micro_batches: int) -> list[list[int]]:
    size = len(rows) // micro_batches
    return [rows[m * size : (m + 1) * size] for m in range(micro_batches)]


def _micro_batch(
    batch: RolloutBatch, advantages: Tensor, rows: list[int], pad: list[bool]
) -> MicroBatch:
    idx = torch.tensor(rows)
    P = batch.prompts.shape[1]
    keep = (~torch.tensor(pad, dtype=torch.bool)).float()[:, None]  # (b, 1): 0 on padding rows
    attention = batch.attention_mask[idx]  # (b, P + R)
    p_len = int(attention[:, :P].sum(-1).max())  # longest prompt in this micro-batch
    r_len = int(attention[:, P:].sum(-1).max())  # longest response
    cols = slice(P - p_len, P + r_len)
    resp = slice(0, r_len)
    mb = MicroBatch(
        input_ids=batch.input_ids[idx][:, cols].contiguous(),
        attention_mask=attention[:, cols].contiguous(),
        position_ids=batch.position_ids[idx][:, cols].contiguous(),
        response_mask=(batch.response_mask[idx][:, resp] * keep).contiguous(),
        rollout_log_probs=batch.rollout_log_probs[idx][:, resp].contiguous(),
        advantages=(advantages[idx][:, resp] * keep).contiguous(),
    )
    replay = batch.replay
    if isinstance(replay, Replay):
        mb.replay = Replay(*(None if t is None else t[idx][:, cols].contiguous()
                             for t in (replay.routed_experts, replay.indexer_topk)))
    return mb


def micro_batch_from(views: dict[str, Tensor], m: int,
                     handles: list[ReplayHandle | None] | None = None) -> MicroBatch:
    """Micro-batch m of a rank's slot (`{m}.{field}` views), as `split_batch` built it."""
    at = {f: views[f"{m}.{f}"] for f in MICRO_BATCH_FIELDS}
    mb = MicroBatch(at["input_ids"], at["attention_mask"], at["position_ids"],
                    at["response_mask"], at["rollout_log_probs"], at["advantages"])
    arrays = {f: views[f"{m}.{f}"] for f in ARRAY_NAMES if f"{m}.{f}" in views}
    if handles is not None:
        mb.replay = handles
    elif arrays:
        mb.replay = Replay(**arrays)
    return mb
