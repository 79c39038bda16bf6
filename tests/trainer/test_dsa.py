"""DSA-style sparse attention: the indexer's top-k, its tie rule, and the model with it on."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from flowmap.trainer.model import ModelConfig, TinyLM, build_model
from flowmap.trainer.sparse_attention import topk_positions

CFG = ModelConfig(
    vocab_size=16, max_seq_len=32, d_model=32, n_layers=2, n_heads=4, d_ff=64,
    dsa_index_topk=3, dsa_index_dim=8,
)  # fmt: skip



def causal(T: int) -> torch.Tensor:
    return torch.ones(T, T, dtype=torch.bool).tril()[None]  # (1, T, T)


def test_top_k_keeps_everything_while_fewer_keys_exist_and_pads_with_minus_one() -> None:
    scores = torch.tensor([[[0.0, 0, 0, 0, 0], [1, 2, 0, 0, 0], [3, 1, 2, 0, 0],
                            [1, 4, 2, 3, 0], [5, 1, 1, 4, 9]]])  # fmt: skip
    keep, positions = topk_positions(scores, causal(5), torch.arange(5)[None], k=3)
    assert positions.dtype == torch.int32
    assert positions[0].tolist() == [[0, -1, -1], [0, 1, -1], [0, 1, 2], [1, 2, 3], [0, 3, 4]]
    assert keep[0].long().sum(-1).tolist() == [1, 2, 3, 3, 3]
    # keep and positions describe the same keys
    for t in range(5):
        assert keep[0, t].nonzero().flatten().tolist() == [
            p for p in positions[0, t].tolist() if p >= 0
        ]


def test_ties_go_to_the_earlier_position_and_k_may_exceed_the_context() -> None:
    scores = torch.zeros(1, 4, 4)  # ReLU makes all-zero scores common: a tie rule is needed
    _, positions = topk_positions(scores, causal(4), torch.arange(4)[None], k=2)
    assert positions[0, 3].tolist() == [0, 1]
    _, wide = topk_positions(scores, causal(4), torch.arange(4)[None], k=6)
    assert wide.shape == (1, 4, 6) and wide[0, 3].tolist() == [0, 1, 2, 3, -1, -1]


def test_positions_not_columns_are_recorded() -> None:
    # Left padding shifts columns; a key's recorded id is its token position.
    scores = torch.tensor([[[0.0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 3, 5]]])
    visible = causal(4) & torch.tensor([False, False, True, True])[None, None, :]
    positions_of_columns = torch.tensor([[0, 0, 0, 1]])  # two pads, then positions 0 and 1
    _, positions = topk_positions(scores, visible, positions_of_columns, k=3)
    assert positions[0, 2].tolist() == [0, -1, -1] and positions[0, 3].tolist() == [0, 1, -1]


def model_pair(topk: int) -> tuple[TinyLM, TinyLM]:
    """A DSA model and a dense model with the same weights everywhere but the indexer."""
    sparse = build_model(dataclasses.replace(CFG, dsa_index_topk=topk), seed=0).eval()
    dense = build_model(dataclasses.replace(CFG, dsa_index_topk=0), seed=0).eval()
    missing, unexpected = dense.load_state_dict(sparse.state_dict(), strict=False)
    assert not missing and all(".indexer." in name for name in unexpected)
    return sparse, dense


def test_with_k_at_least_the_length_dsa_is_dense_attention_and_below_it_is_not() -> None:
    ids = torch.tensor([[3, 4, 5, 6, 7, 8, 9, 10, 11, 12]])
    with torch.no_grad():
        sparse, dense = model_pair(topk=10)
        torch.testing.assert_close(sparse(ids), dense(ids), atol=1e-6, rtol=0)
        sparse, dense = model_pair(topk=3)
        logits, used = sparse.forward_with_selections(ids)
        assert not torch.allclose(logits, dense(ids), atol=1e-4)
    assert used.indexer_topk is not None and used.indexer_topk.shape == (1, 10, 2, 3)
    assert used.routed_experts is None


def test_dsa_model_keeps_padding_invariance() -> None:
    model = build_model(CFG, seed=0).eval()
    short, long = [5, 6, 7, 8, 9], [3, 4, 5, 6, 7, 8, 9, 10]
    ids = torch.tensor([[0, 0, 0, *short], long])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1], [1] * 8])
    with torch.no_grad():
        batched, used = model.forward_with_selections(ids, mask)
        alone, used_alone = model.forward_with_selections(torch.tensor([short]))
    assert not batched.isnan().any()
    torch.testing.assert_close(batched[0, 3:], alone[0], atol=1e-5, rtol=0)
    assert used.indexer_topk is not None and used_alone.indexer_topk is not None
    assert torch.equal(used.indexer_topk[0, 3:], used_alone.indexer_topk[0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"dsa_index_topk": -1}, "dsa_index_topk"),
        ({"dsa_index_topk": 2, "dsa_index_dim": 0}, "dsa_index_dim"),
    ],
)
def test_dsa_config_is_validated(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ModelConfig(vocab_size=8, **kwargs)
