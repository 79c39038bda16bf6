"""The rollout engine against a plain full-recompute forward pass, and its RL controls.

The reference is minGPT's kind of test: greedy decoding with TinyLM.forward on
the whole sequence every token, no cache, no batching. The engine must produce
the same tokens, and the same log-probs to ~1e-5, however it batches, pages or
preempts. The parity tests run for every model variant (dense, MoE, DSA, both)
with replay recording on, and also check each output's recorded selections
against the reference forward's.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator

import pytest
import torch

import flowmap
from flowmap.trainer.engine import (
    EngineConfig,
    LLMEngine,
    RequestOutput,
    SamplingParams,
    continuation,
)
from flowmap.trainer.model import ModelConfig, TinyLM, build_model

CFG = ModelConfig(vocab_size=24, max_seq_len=64, d_model=32, n_layers=2, n_heads=4, d_ff=64)
GREEDY = SamplingParams(temperature=0.0, max_tokens=12)
# DSA keeps 4 of up to ~28 past positions: sparse enough that the indexer decides a lot.
VARIANTS = {
    "dense": CFG,
    "moe": dataclasses.replace(CFG, moe_experts=4, moe_top_k=2),
    "dsa": dataclasses.replace(CFG, dsa_index_topk=4, dsa_index_dim=8),
    "moe+dsa": dataclasses.replace(CFG, moe_experts=4, moe_top_k=2, dsa_index_topk=4, dsa_index_dim=8),
}



@pytest.fixture(scope="module")
def model() -> TinyLM:
    return build_model(CFG, seed=0).eval()


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request: pytest.FixtureRequest) -> TinyLM:
    return build_model(VARIANTS[request.param], seed=0).eval()


@torch.no_grad()
def reference(
    model: TinyLM, prompt: list[int], max_tokens: int, temperature: float = 1.0
) -> tuple[list[int], list[float]]:
    """Greedy tokens and their log-probs (under logits / temperature), recomputing everything."""
    ids, logprobs = list(prompt), []
    for _ in range(max_tokens):
        logits = model(torch.tensor([ids]))[0, -1]  # (V,)
        token = int(logits.argmax())
        logprobs.append(float(torch.log_softmax(logits / temperature, -1)[token]))
        ids.append(token)
        if len(ids) >= model.cfg.max_seq_len:
            break
    return ids[len(prompt) :], logprobs


def assert_matches_reference(model: TinyLM, out: RequestOutput, max_tokens: int) -> None:
    tokens, logprobs = reference(model, out.prompt_token_ids, max_tokens)
    assert out.output_token_ids == tokens, out.request_id
    assert out.logprobs == pytest.approx(logprobs, abs=1e-5), out.request_id
    assert_replay_matches_reference(model, out)


@torch.no_grad()
def assert_replay_matches_reference(model: TinyLM, out: RequestOutput) -> None:
    """Recorded selections = the full forward's, row p = position p, all but the last token."""
    ids = torch.tensor([out.prompt_token_ids + out.output_token_ids])
    _, used = model.forward_with_selections(ids)
    for name in ("routed_experts", "indexer_topk"):
        recorded, expected = getattr(out, name), getattr(used, name)
        if expected is None:
            assert recorded is None, name
        else:
            assert recorded is not None and recorded.dtype == torch.int32, name
            assert torch.equal(recorded, expected[0, :-1]), (out.request_id, name)


def random_prompts(num: int, seed: int, lengths: tuple[int, int] = (1, 14)) -> list[list[int]]:
    rng = random.Random(seed)
    return [
        [rng.randrange(3, CFG.vocab_size) for _ in range(rng.randint(*lengths))] for _ in range(num)
    ]


def record_batches(engine: LLMEngine) -> list[list[int]]:
    """Patch the engine to log, per step, each scheduled sequence's number of new tokens."""
    batches: list[list[int]] = []
    run = engine.model_runner.run

    def logged_run(seqs):  # type: ignore[no-untyped-def]
        batches.append([s.num_new_tokens for s in seqs])
        return run(seqs)

    engine.model_runner.run = logged_run  # type: ignore[method-assign]
    return batches


def drain(engine: LLMEngine, max_steps: int = 1000) -> Iterator[RequestOutput]:
    for _ in range(max_steps):
        if not engine.has_unfinished_requests():
            return
        yield from engine.step()
    raise AssertionError("engine did not finish")


# -- parity with the reference ---------------------------------------------------------


def test_greedy_generate_matches_full_recompute(variant: TinyLM) -> None:
    model = variant
    engine = LLMEngine(model, EngineConfig(num_kv_blocks=64, block_size=4, return_replay=True))
    prompts = random_prompts(6, seed=1)
    outs = engine.generate(prompts, GREEDY)
    assert [o.prompt_token_ids for o in outs] == prompts
    for out in outs:
        assert out.finish_reason == "length"
        assert_matches_reference(model, out, GREEDY.max_tokens)


def test_greedy_matches_reference_under_continuous_batching(variant: TinyLM) -> None:
    model = variant
    # GIVEN requests of different lengths arriving while others decode, more than fit at once
    engine = LLMEngine(
        model,
        EngineConfig(
            num_kv_blocks=64, block_size=4, max_num_seqs=4, max_num_batched_tokens=40,
            return_replay=True,
        ),
    )
    batches = record_batches(engine)
    prompts = random_prompts(10, seed=2)
    max_tokens = [3, 15, 7, 1, 11, 5, 9, 2, 13, 6]
    arrivals = {0: [0, 1, 2], 2: [3, 4], 3: [5], 6: [6, 7, 8], 11: [9]}
    outs: dict[str, RequestOutput] = {}
    # WHEN the engine steps while requests keep arriving
    for step in range(200):
        for i in arrivals.get(step, []):
            engine.add_request(
                f"r{i}", prompts[i], SamplingParams(temperature=0, max_tokens=max_tokens[i])
            )
        outs.update((o.request_id, o) for o in engine.step())
        if step > max(arrivals) and not engine.has_unfinished_requests():
            break
    # THEN prefill and decode shared steps, the batch was refilled, and every output is exact
    assert any(max(b) > 1 and min(b) == 1 for b in batches), "no step mixed prefill and decode"
    assert max(len(b) for b in batches) == 4
    assert len(outs) == 10
    for i in range(10):
        assert_matches_reference(model, outs[f"r{i}"], max_tokens[i])
    assert engine.kv_blocks_used == 0


@pytest.mark.parametrize("enable_prefix_caching", [True, False])
def test_greedy_matches_reference_under_preemption(
    variant: TinyLM, enable_prefix_caching: bool
) -> None:
    model = variant
    # GIVEN a KV pool of 10 blocks of 4 tokens for 8 sequences that grow to ~28 tokens each
    config = EngineConfig(
        num_kv_blocks=10,
        block_size=4,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        enable_prefix_caching=enable_prefix_caching,
        return_replay=True,
    )
    engine = LLMEngine(model, config)
    prompts = random_prompts(8, seed=3, lengths=(4, 10))
    params = SamplingParams(temperature=0, max_tokens=18)
    for i, prompt in enumerate(prompts):
        engine.add_request(f"r{i}", prompt, params)
    # WHEN it runs to completion
    outs = {o.request_id: o for o in drain(engine)}
    # THEN sequences were preempted and recomputed, and outputs are still exact
    assert engine.scheduler.num_preemptions > 0
    for i in range(8):
        assert_matches_reference(model, outs[f"r{i}"], 18)
    assert engine.kv_blocks_used == 0


def test_multi_turn_continuation_hits_the_prefix_cache(variant: TinyLM) -> None:
    model = variant
    engine = LLMEngine(model, EngineConfig(num_kv_blocks=32, block_size=4, return_replay=True))
    batches = record_batches(engine)
    (first,) = engine.generate([random_prompts(1, seed=4, lengths=(9, 9))[0]], GREEDY)
    turn2 = first.prompt_token_ids + first.output_token_ids + [5, 6]  # the environment answers
    (second,) = engine.generate([turn2], GREEDY)
    assert batches[len(batches) - GREEDY.max_tokens][0] < len(turn2)  # cached blocks not recomputed
    assert_matches_reference(model, second, GREEDY.max_tokens)


# -- sampling ----------------------------------------------------------------------------


def test_tiny_top_p_is_greedy_and_logprobs_use_the_temperature(model: TinyLM) -> None:
    engine = LLMEngine(model, EngineConfig(num_kv_blocks=64, block_size=4))
    prompts = random_prompts(4, seed=5)
    outs = engine.generate(prompts, SamplingParams(temperature=0.7, top_p=1e-6, max_tokens=10))
    for out in outs:
        tokens, logprobs = reference(model, out.prompt_token_ids, 10, temperature=0.7)
        assert out.output_token_ids == tokens
        assert out.logprobs == pytest.approx(logprobs, abs=1e-5)


def test_temperature_spreads_samples_and_seeds_reproduce_them(model: TinyLM) -> None:
    prompt = random_prompts(1, seed=6)[0]

    def samples(temperature: float, seed: int | None) -> list[RequestOutput]:
        engine = LLMEngine(model, EngineConfig(num_kv_blocks=64, block_size=4))
        params = SamplingParams(temperature=temperature, n=8, max_tokens=6, seed=seed)
        return engine.generate([prompt], params)

    def distinct(outs: list[RequestOutput]) -> int:
        return len({tuple(o.output_token_ids) for o in outs})

    # The random-init model's logits are nearly flat: only a very low temperature concentrates them.
    hot, cold = samples(2.0, seed=7), samples(1e-4, seed=7)
    assert distinct(hot) == 8 and distinct(cold) == 1
    assert cold[0].output_token_ids == reference(model, prompt, 6)[0]
    assert [o.output_token_ids for o in samples(2.0, seed=7)] == [o.output_token_ids for o in hot]
    assert distinct(samples(2.0, seed=7) + samples(2.0, seed=8)) == 16
    # Each sampled token's log-prob is under the tempered model distribution.
    for out in hot:
        ids = torch.tensor([out.prompt_token_ids + out.output_token_ids])
        with torch.no_grad():
            logits = model(ids)[0, len(prompt) - 1 : -1]  # (R, V): predicts each output token
        expected = torch.log_softmax(logits / 2.0, -1).gather(-1, ids[0, len(prompt) :, None])
        assert out.logprobs == pytest.approx(expected.squeeze(-1).tolist(), abs=1e-5)


def test_seeded_samples_do_not_depend_on_batching_or_preemption(model: TinyLM) -> None:
    prompts = random_prompts(6, seed=9, lengths=(4, 10))
    params = [SamplingParams(temperature=1.0, max_tokens=16, seed=100 + i) for i in range(6)]

    def run(config: EngineConfig) -> tuple[dict[str, list[int]], int]:
        engine = LLMEngine(model, config)
        for i, prompt in enumerate(prompts):
            engine.add_request(f"r{i}", prompt, params[i])
        outs = {o.request_id: o.output_token_ids for o in drain(engine)}
        return outs, engine.scheduler.num_preemptions

    alone, _ = run(EngineConfig(num_kv_blocks=64, block_size=4, max_num_seqs=1))
    squeezed, preemptions = run(EngineConfig(num_kv_blocks=8, block_size=4, max_num_seqs=6))
    assert preemptions > 0
    assert squeezed == alone


def test_n_expands_into_named_samples(model: TinyLM) -> None:
    engine = LLMEngine(model, EngineConfig())
    engine.add_request("q", [3, 4, 5], SamplingParams(n=4, max_tokens=5, seed=1))
    assert engine.num_unfinished_requests() == 4
    outs = sorted(drain(engine), key=lambda o: o.request_id)
    assert [o.request_id for o in outs] == ["q#0", "q#1", "q#2", "q#3"]
    assert all(len(o.output_token_ids) == len(o.logprobs) == 5 for o in outs)
    assert len({tuple(o.output_token_ids) for o in outs}) > 1


def test_stop_tokens_end_a_sequence_and_are_kept(model: TinyLM) -> None:
    prompt = random_prompts(1, seed=10)[0]
    greedy, _ = reference(model, prompt, 12)
    stop = greedy[3]
    first = greedy.index(stop)
    engine = LLMEngine(model, EngineConfig())
    (out,) = engine.generate(
        [prompt], SamplingParams(temperature=0, max_tokens=12, stop_token_ids=(stop,))
    )
    assert out.finish_reason == "stop"
    assert out.output_token_ids == greedy[: first + 1]


def test_max_tokens_and_max_seq_len_bound_the_output(model: TinyLM) -> None:
    engine = LLMEngine(model, EngineConfig())
    outs = engine.generate([[3], [4, 5]], SamplingParams(temperature=0, max_tokens=1))
    assert [len(o.output_token_ids) for o in outs] == [1, 1]
    long_prompt = [3] * (CFG.max_seq_len - 4)
    (out,) = engine.generate([long_prompt], SamplingParams(temperature=0, max_tokens=32))
    assert out.finish_reason == "length" and len(out.output_token_ids) == 4


def test_abort_withdraws_running_and_waiting_sequences(model: TinyLM) -> None:
    engine = LLMEngine(model, EngineConfig(max_num_seqs=1))
    engine.add_request("running", [3, 4, 5], SamplingParams(max_tokens=20))
    engine.add_request("waiting", [6, 7], SamplingParams(max_tokens=20))
    engine.step()
    engine.step()
    out = engine.abort("running")
    assert out is not None and out.finish_reason == "abort" and len(out.output_token_ids) == 2
    assert len(out.logprobs) == 2
    waiting = engine.abort("waiting")
    assert waiting is not None and waiting.output_token_ids == []
    assert engine.abort("running") is None and engine.abort("never-added") is None
    assert not engine.has_unfinished_requests() and engine.kv_blocks_used == 0
    assert engine.step() == []


def test_two_instances_are_independent(model: TinyLM) -> None:
    a, b = (
        LLMEngine(model, EngineConfig(), instance=0),
        LLMEngine(model, EngineConfig(), instance=1),
    )
    prompts = random_prompts(3, seed=11)
    before = [o.output_token_ids for o in b.generate(prompts, GREEDY)]
    a.update_weights([(n, torch.randn_like(p)) for n, p in model.named_parameters()], version=1)
    assert a.weight_version == 1 and b.weight_version == 0
    assert [o.output_token_ids for o in b.generate(prompts, GREEDY)] == before
    assert [o.output_token_ids for o in a.generate(prompts, GREEDY)] != before
    assert model.lm_head.weight.data_ptr() != a.model.lm_head.weight.data_ptr()
    a.add_request("x", [3, 4], GREEDY)
    a.step()
    assert a.kv_blocks_used > 0 and b.kv_blocks_used == 0


# -- RL controls -------------------------------------------------------------------------


def test_weight_sync_sequence_loses_nothing_and_every_call_is_idempotent(model: TinyLM) -> None:
    # GIVEN requests mid-flight, some running and some waiting
    engine = LLMEngine(model, EngineConfig(num_kv_blocks=32, block_size=4, max_num_seqs=3))
    prompts = random_prompts(5, seed=12)
    params = SamplingParams(temperature=0, max_tokens=10)
    for i, prompt in enumerate(prompts):
        engine.add_request(f"r{i}", prompt, params)
    early = [o for _ in range(4) for o in engine.step()]
    new_weights = build_model(CFG, seed=1)
    # WHEN the five rollout-side steps run, each twice
    paused = engine.pause_generation()
    assert engine.pause_generation() == []
    assert engine.step() == []  # paused: nothing is scheduled
    engine.release_kv_cache()
    engine.release_kv_cache()
    with pytest.raises(RuntimeError, match="resume_kv_cache"):
        engine.step()
    engine.update_weights(new_weights.named_parameters(), version=1)
    engine.update_weights(new_weights.named_parameters(), version=1)  # a retry: no-op
    # versions only go up: other weights under the same version, or an older one, are refused
    with pytest.raises(ValueError, match="already loaded with different weights"):
        engine.update_weights(
            [(n, torch.zeros_like(p)) for n, p in model.named_parameters()], version=1
        )
    with pytest.raises(ValueError, match="older than the engine's 1"):
        engine.update_weights(model.named_parameters(), version=0)
    engine.resume_kv_cache()
    engine.resume_kv_cache()
    engine.continue_generation()
    engine.continue_generation()
    # THEN every request is either finished or handed back with its partial output
    assert sorted(o.request_id for o in early + paused) == [f"r{i}" for i in range(5)]
    assert {o.finish_reason for o in paused} == {"paused"}
    assert any(o.output_token_ids for o in paused) and any(not o.output_token_ids for o in paused)
    assert all(len(o.output_token_ids) == len(o.logprobs) for o in paused)
    assert engine.weight_version == 1 and engine.kv_blocks_used == 0
    for name, p in engine.model.named_parameters():  # the refused updates changed nothing
        assert torch.equal(p, dict(new_weights.named_parameters())[name]), name
    # THEN resubmitting the paused ones finishes them under the new weights
    for out in paused:
        prompt, rest = continuation(out, params)
        engine.add_request(out.request_id, prompt, rest)
    resumed = {o.request_id: o for o in drain(engine)}
    for out in paused:
        done = resumed[out.request_id]
        assert len(out.output_token_ids) + len(done.output_token_ids) == 10
        assert done.weight_version == 1 and done.finish_reason == "length"
        tokens, _ = reference(new_weights.eval(), done.prompt_token_ids, len(done.output_token_ids))
        assert done.output_token_ids == tokens


def test_release_while_running_falls_back_to_recompute(variant: TinyLM) -> None:
    model = variant
    engine = LLMEngine(model, EngineConfig(num_kv_blocks=32, block_size=4, return_replay=True))
    prompts = random_prompts(3, seed=13)
    for i, prompt in enumerate(prompts):
        engine.add_request(f"r{i}", prompt, GREEDY)
    engine.step()
    engine.step()
    engine.release_kv_cache()
    assert engine.kv_blocks_used == 0 and engine.num_unfinished_requests() == 3
    engine.resume_kv_cache()
    outs = list(drain(engine))
    assert len(outs) == 3
    for out in outs:
        assert_matches_reference(model, out, GREEDY.max_tokens)


def test_bad_weight_updates_leave_the_old_weights_whole(model: TinyLM) -> None:
    engine = LLMEngine(model, EngineConfig())
    good = [(n, torch.zeros_like(p)) for n, p in model.named_parameters()]
    with pytest.raises(KeyError, match="no parameter"):
        engine.update_weights([*good, ("nope", torch.zeros(1))], version=1)
    with pytest.raises(ValueError, match="shape"):
        engine.update_weights([*good, ("lm_head.weight", torch.zeros(1))], version=1)
    assert engine.weight_version == 0
    assert torch.equal(engine.model.lm_head.weight, model.lm_head.weight)


def test_kv_blocks_used_is_counted_once_per_step(
    model: TinyLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples: list[tuple[str, float]] = []
    monkeypatch.setattr(flowmap, "counter", lambda name, value: samples.append((name, value)))
    engine = LLMEngine(model, EngineConfig(block_size=4))
    engine.add_request("r", [3, 4, 5, 6, 7], SamplingParams(max_tokens=4))
    steps = 0
    while engine.has_unfinished_requests():
        engine.step()
        steps += 1
    assert [n for n, _ in samples] == ["kv_blocks_used"] * steps
    assert [v for _, v in samples] == [2, 2, 2, 0]  # 5..8 tokens fit 2 blocks; then all freed


def test_capacity_and_request_validation(model: TinyLM) -> None:
    engine = LLMEngine(
        model,
        EngineConfig(num_kv_blocks=4, block_size=4, max_num_seqs=3, max_num_batched_tokens=16),
    )
    assert engine.free_capacity() == 3 and engine.num_kv_blocks == 4
    engine.add_request("a", [3, 4], SamplingParams(n=2, max_tokens=2))
    assert engine.free_capacity() == 1 and engine.num_unfinished_requests() == 2
    with pytest.raises(ValueError, match="still unfinished"):
        engine.add_request("a#1", [3], SamplingParams(max_tokens=2))
    with pytest.raises(ValueError, match="empty prompt"):
        engine.add_request("b", [], SamplingParams())
    with pytest.raises(ValueError, match="outside"):
        engine.add_request("b", [CFG.vocab_size], SamplingParams())
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        engine.add_request("b", [3] * 10, SamplingParams(max_tokens=10))
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)
    with pytest.raises(ValueError, match="max_num_seqs"):
        EngineConfig(max_num_seqs=8, max_num_batched_tokens=4)
    engine.add_request("c", [3], SamplingParams(max_tokens=2))
    assert engine.free_capacity() == 0
