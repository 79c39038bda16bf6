"""TinyLM and CharTokenizer: padding invariance, determinism, validation."""

from __future__ import annotations

import pytest
import torch

from flowmap.trainer.model import ModelConfig, TinyLM, build_model
from flowmap.trainer.tokenizer import CharTokenizer

CFG = ModelConfig(vocab_size=16, max_seq_len=32, d_model=32, n_layers=2, n_heads=4, d_ff=64)


@pytest.fixture(scope="module")
def model() -> TinyLM:
    return build_model(CFG, seed=0).eval()


def test_left_padded_prompts_give_the_unpadded_logits(model: TinyLM) -> None:
    # GIVEN two prompts of different lengths, left-padded into one batch
    short, long = [5, 6, 7], [3, 4, 5, 6, 7, 8]
    ids = torch.tensor([[0, 0, 0, *short], long])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [1] * 6])
    # WHEN the batch and each prompt alone go through forward
    with torch.no_grad():
        batched = model(ids, attention_mask=mask)  # (2, 6, V)
        alone_short = model(torch.tensor([short]))[0]
        alone_long = model(torch.tensor([long]))[0]
    # THEN every real token has the logits it has alone, and nothing is NaN
    assert not batched.isnan().any()
    torch.testing.assert_close(batched[0, 3:], alone_short, atol=1e-5, rtol=0)
    torch.testing.assert_close(batched[1], alone_long, atol=1e-5, rtol=0)


def test_prompt_response_packing_slice_gives_response_logprobs(model: TinyLM) -> None:
    # GIVEN [left-padded prompt | right-padded response], as the trainer packs a batch
    prompts, responses = [[4, 5], [6, 7, 8]], [[9, 10, 11], [12]]
    P, R = 3, 3
    rows, masks = [], []
    for p, r in zip(prompts, responses, strict=True):
        rows.append([0] * (P - len(p)) + p + r + [0] * (R - len(r)))
        masks.append([0] * (P - len(p)) + [1] * (len(p) + len(r)) + [0] * (R - len(r)))
    with torch.no_grad():
        logits = model(torch.tensor(rows), attention_mask=torch.tensor(masks))
        response_logits = logits[:, -R - 1 : -1]  # (B, R, V): position t predicts response token t
        for b, (p, r) in enumerate(zip(prompts, responses, strict=True)):
            alone = model(torch.tensor([p + r]))[0, len(p) - 1 : -1]  # (len(r), V)
            # THEN the slice holds, for each real response token, the logits that predict it
            torch.testing.assert_close(response_logits[b, : len(r)], alone, atol=1e-5, rtol=0)


def test_default_positions_count_real_tokens(model: TinyLM) -> None:
    ids = torch.tensor([[0, 0, 5, 6, 7]])
    mask = torch.tensor([[0, 0, 1, 1, 1]])
    explicit = torch.tensor([[0, 0, 0, 1, 2]])
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids, mask), model(ids, mask, position_ids=explicit), atol=0, rtol=0
        )


def test_positions_beyond_max_seq_len_are_a_clear_error(model: TinyLM) -> None:
    with pytest.raises(ValueError, match="max_seq_len"):
        model(torch.ones(1, CFG.max_seq_len + 1, dtype=torch.long))


def test_build_model_depends_only_on_seed_and_leaves_global_rng_alone() -> None:
    state = torch.get_rng_state()
    a, b, c = build_model(CFG, 1), build_model(CFG, 1), build_model(CFG, 2)
    assert torch.equal(torch.get_rng_state(), state)
    for (name, pa), pb, pc in zip(
        a.named_parameters(), b.parameters(), c.parameters(), strict=True
    ):
        assert torch.equal(pa, pb), name
        if pa.dim() >= 2:
            assert not torch.equal(pa, pc), name


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"vocab_size": 0}, "vocab_size"),
        ({"vocab_size": 8, "d_model": 30, "n_heads": 4}, "divisible"),
        ({"vocab_size": 8, "n_layers": -1}, "n_layers"),
    ],
)
def test_model_config_is_validated_once(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ModelConfig(**kwargs)


def test_char_tokenizer_round_trips_and_skips_specials() -> None:
    tok = CharTokenizer("0123456789+=|")
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    assert tok.vocab_size == 3 + 13
    ids = tok.encode("12+3=15|")
    assert ids[0] == 3 + 1 and len(ids) == 8
    assert tok.decode([tok.bos_id, *ids, tok.eos_id, tok.pad_id]) == "12+3=15|"


def test_char_tokenizer_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="repeats"):
        CharTokenizer("abca")
    tok = CharTokenizer("ab")
    with pytest.raises(ValueError, match="'c'"):
        tok.encode("abc")
    with pytest.raises(ValueError, match="outside"):
        tok.decode([99])
