"""Rollout routing replay (R3) and its DSA analogue, end to end through the engine.

GIVEN a MoE + DSA model whose training-side router and indexer scores carry
noise (a stand-in for train/inference numeric drift) and a rollout engine that
records its selections, WHEN training runs the rollout's sequences as a padded
batch, THEN with replay every selection training uses equals rollout's, and
without it they differ. Also: gradients still reach the router, continuations
concatenate to exactly the final sequence's positions, and rows survive
pause / weight update / resubmit.
"""

from __future__ import annotations

import random

import pytest
import torch

from flowmap.trainer.engine import (
    EngineConfig,
    LLMEngine,
    RequestOutput,
    SamplingParams,
    continuation,
)
from flowmap.trainer.model import ModelConfig, TinyLM, build_model
from flowmap.trainer.replay import (
    Replay,
    batch_replay,
    collate_replay,
    concat_replay,
    left_padding,
)

CFG = ModelConfig(
    vocab_size=24, max_seq_len=64, d_model=32, n_layers=2, n_heads=4, d_ff=64,
    moe_experts=4, moe_top_k=2, dsa_index_topk=4, dsa_index_dim=8, router_noise=1.0,
)  # fmt: skip
PAD = 0



def random_prompts(num: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [
        [rng.randrange(3, CFG.vocab_size) for _ in range(rng.randint(3, 12))] for _ in range(num)
    ]


def rollout(
    model: TinyLM, prompts: list[list[int]], **engine_kwargs: int
) -> tuple[list[RequestOutput], int]:
    """Sampled (seeded) rollouts and the number of preemptions they went through."""
    engine = LLMEngine(model, EngineConfig(block_size=4, return_replay=True, **engine_kwargs))
    outs = engine.generate(prompts, SamplingParams(temperature=1.0, max_tokens=14, seed=7))
    return outs, engine.scheduler.num_preemptions


def pack(outs: list[RequestOutput]) -> tuple[torch.Tensor, torch.Tensor, Replay, list[int]]:
    """The trainer's layout: [left-padded prompt | right-padded response], replay aligned to it."""
    P = max(len(o.prompt_token_ids) for o in outs)
    R = max(len(o.output_token_ids) for o in outs)
    ids = torch.full((len(outs), P + R), PAD)
    mask = torch.zeros(len(outs), P + R, dtype=torch.long)
    offsets = []
    for b, o in enumerate(outs):
        seq = o.prompt_token_ids + o.output_token_ids
        offset = P - len(o.prompt_token_ids)
        ids[b, offset : offset + len(seq)] = torch.tensor(seq)
        mask[b, offset : offset + len(seq)] = 1
        offsets.append(offset)
    rows = [Replay(o.routed_experts, o.indexer_topk) for o in outs]
    return ids, mask, batch_replay(rows, mask), offsets


def recorded(replay: Replay) -> torch.Tensor:
    """(B, T) columns that carry a rollout row."""
    assert replay.routed_experts is not None
    return (replay.routed_experts >= 0).all(-1).all(-1)


def test_replayed_selections_equal_rollout_and_unreplayed_ones_drift() -> None:
    # GIVEN rollouts recorded by the engine (eval mode: no noise), squeezed into preemption
    model = build_model(CFG, seed=0)
    outs, preemptions = rollout(model, random_prompts(6, seed=1), num_kv_blocks=12, max_num_seqs=6)
    assert preemptions > 0
    ids, mask, replay, _ = pack(outs)
    rows = recorded(replay)
    assert int(rows.sum()) == sum(
        len(o.prompt_token_ids) + len(o.output_token_ids) - 1 for o in outs
    )
    # WHEN the training model (train mode: noisy scores) runs the batch with and without replay
    model.train()
    torch.manual_seed(0)
    _, with_replay = model.forward_with_selections(ids, mask, replay=replay)
    _, without = model.forward_with_selections(ids, mask)
    assert replay.routed_experts is not None and replay.indexer_topk is not None
    assert with_replay.routed_experts is not None and with_replay.indexer_topk is not None
    assert without.routed_experts is not None and without.indexer_topk is not None
    # THEN every recorded row is used exactly, and the noisy router/indexer alone would differ
    assert torch.equal(with_replay.routed_experts[rows], replay.routed_experts[rows])
    assert torch.equal(with_replay.indexer_topk[rows], replay.indexer_topk[rows])
    assert not torch.equal(without.routed_experts[rows], replay.routed_experts[rows])
    assert not torch.equal(without.indexer_topk[rows], replay.indexer_topk[rows])


def test_replay_in_eval_mode_reproduces_the_behaviour_logprobs_and_gradients_reach_the_router() -> (
    None
):
    model = build_model(CFG, seed=0)
    outs, _ = rollout(model, random_prompts(4, seed=2), num_kv_blocks=64)
    ids, mask, replay, offsets = pack(outs)
    # Eval (no noise): replayed selections = own selections, so log-probs match rollout's.
    logits = model.eval()(ids, mask, replay=replay)  # (B, T, V)
    logprobs = torch.log_softmax(logits, -1)
    for b, o in enumerate(outs):
        start = offsets[b] + len(o.prompt_token_ids) - 1  # column predicting output token 0
        cols = torch.arange(start, start + len(o.output_token_ids))
        chosen = logprobs[b, cols, torch.tensor(o.output_token_ids)]
        assert chosen.tolist() == pytest.approx(o.logprobs, abs=1e-5)
    # Train mode with replay: the selection is fixed, the gates are not, so the router learns.
    model.train()
    model(ids, mask, replay=replay).logsumexp(-1).mean().backward()
    block = model.blocks[0]
    assert block.ffn.router.weight.grad is not None  # type: ignore[union-attr]
    assert block.ffn.router.weight.grad.abs().sum() > 0  # type: ignore[union-attr]


def test_paused_and_resubmitted_rows_concatenate_to_the_final_sequence() -> None:
    # GIVEN requests paused mid-generation, weights updated, then continued
    model = build_model(CFG, seed=0).eval()
    new_weights = build_model(CFG, seed=1).eval()
    engine = LLMEngine(
        model, EngineConfig(num_kv_blocks=32, block_size=4, max_num_seqs=2, return_replay=True)
    )
    params = SamplingParams(temperature=0, max_tokens=10)
    prompts = random_prompts(3, seed=3)
    for i, prompt in enumerate(prompts):
        engine.add_request(f"r{i}", prompt, params)
    for _ in range(4):
        assert engine.step() == []
    paused = engine.pause_generation()
    assert any(o.output_token_ids for o in paused) and any(not o.output_token_ids for o in paused)
    engine.release_kv_cache()
    engine.update_weights(new_weights.named_parameters(), version=1)
    engine.resume_kv_cache()
    engine.continue_generation()
    for out in paused:
        engine.add_request(out.request_id, *continuation(out, params))
    resumed: dict[str, RequestOutput] = {}
    while engine.has_unfinished_requests():
        resumed.update((o.request_id, o) for o in engine.step())
    for first in paused:
        second = resumed[first.request_id]
        tokens = first.prompt_token_ids + first.output_token_ids + second.output_token_ids
        experts = concat_replay(first.routed_experts, second.routed_experts)
        kept = concat_replay(first.indexer_topk, second.indexer_topk)
        assert experts is not None and kept is not None
        assert first.routed_experts is not None and second.routed_experts is not None
        # THEN the rows cover exactly the final sequence's positions but its last token
        assert len(experts) == len(kept) == len(tokens) - 1
        n1 = len(first.routed_experts)  # 0 when withdrawn before it ever ran
        assert n1 in (0, len(first.prompt_token_ids) + len(first.output_token_ids) - 1)
        # THEN each part's rows are the selections of the weights that produced its tokens
        with torch.no_grad():
            _, old = model.forward_with_selections(torch.tensor([tokens]))
            _, new = new_weights.forward_with_selections(torch.tensor([tokens]))
        assert old.routed_experts is not None and new.routed_experts is not None
        assert torch.equal(experts[:n1], old.routed_experts[0, :n1])
        assert torch.equal(experts[n1:], new.routed_experts[0, n1:-1])
        assert old.indexer_topk is not None and new.indexer_topk is not None
        assert torch.equal(kept[:n1], old.indexer_topk[0, :n1])
        assert torch.equal(kept[n1:], new.indexer_topk[0, n1:-1])


def test_replay_is_off_by_default_and_shapes_are_checked() -> None:
    model = build_model(CFG, seed=0).eval()
    (out,) = LLMEngine(model, EngineConfig()).generate([[3, 4, 5]], SamplingParams(max_tokens=3))
    assert out.routed_experts is None and out.indexer_topk is None
    with pytest.raises(ValueError, match="collate_replay"):
        model(torch.tensor([[3, 4]]), replay=Replay(routed_experts=torch.zeros(1, 2, 2, 3)))


def test_concat_and_collate_helpers() -> None:
    a = torch.arange(6, dtype=torch.int32).view(3, 1, 2)
    b = torch.full((5, 1, 2), 9, dtype=torch.int32)
    joined = concat_replay(a, b)
    assert joined is not None and joined.shape == (5, 1, 2)
    assert torch.equal(joined[:3], a) and torch.equal(joined[3:], b[3:])
    assert concat_replay(None, b) is b and concat_replay(a, None) is a
    batch = collate_replay([a, None], offsets=[1, 0], num_columns=5)
    assert batch is not None and batch.shape == (2, 5, 1, 2)
    assert torch.equal(batch[0, 1:4], a)
    assert (batch[0, [0, 4]] == -1).all() and (batch[1] == -1).all()
    assert collate_replay([None], [0], 3) is None
    assert left_padding(torch.tensor([[0, 0, 1, 1, 0], [1, 1, 1, 0, 0]])) == [2, 0]
