"""The MoE feed-forward: top-k routing, gates from the router, replayed selections, config."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from flowmap.trainer.model import ModelConfig, build_model
from flowmap.trainer.moe import MoE

CFG = ModelConfig(
    vocab_size=16, max_seq_len=32, d_model=32, n_layers=2, n_heads=4, d_ff=64,
    moe_experts=4, moe_top_k=2,
)  # fmt: skip



def moe(noise: float = 0.0) -> MoE:
    torch.manual_seed(0)
    return MoE(d_model=8, d_ff=16, num_experts=4, top_k=2, router_noise=noise)


def test_each_token_goes_to_its_top_k_experts_weighted_by_softmaxed_gates() -> None:
    layer = moe().eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        out, experts = layer(x)
        # THEN the selection is the router's top-2, ascending, int32
        logits = layer.router(x)  # (2, 5, 4)
        top = logits.topk(2, dim=-1).indices.sort(-1).values
        assert experts.dtype == torch.int32 and torch.equal(experts, top.int())
        # THEN the output is the gate-weighted sum of exactly those experts
        gates = torch.softmax(logits.gather(-1, top), -1)
        expected = torch.zeros_like(x)
        for b, t, j in itertools.product(range(2), range(5), range(2)):
            expected[b, t] += gates[b, t, j] * layer.experts[int(top[b, t, j])](x[b, t])
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)


def test_replayed_experts_replace_the_routers_choice_except_in_unrecorded_rows() -> None:
    layer = moe(noise=10.0).train()  # noise so large the router's own choice is random
    x = torch.randn(6, 8)
    replay = torch.tensor([[0, 1], [2, 3], [1, 3], [0, 2], [-1, -1], [0, 3]], dtype=torch.int32)
    out, used = layer(x, replay)
    assert torch.equal(used[[0, 1, 2, 3, 5]], replay[[0, 1, 2, 3, 5]])
    assert (used[4] >= 0).all()  # not recorded: the router chose
    out.sum().backward()
    assert layer.router.weight.grad is not None and layer.router.weight.grad.abs().sum() > 0
    grads = [e.up.weight.grad for e in layer.experts]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)  # every expert got tokens


def test_noise_only_in_train_mode() -> None:
    layer = moe(noise=10.0)
    x = torch.randn(64, 8)
    with torch.no_grad():
        a, b = layer.eval()(x)[1], layer.eval()(x)[1]
        c = layer.train()(x)[1]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_moe_model_keeps_padding_invariance_and_default_config_stays_dense() -> None:
    model = build_model(CFG, seed=0).eval()
    short, long = [5, 6, 7], [3, 4, 5, 6, 7, 8]
    with torch.no_grad():
        batched = model(
            torch.tensor([[0, 0, 0, *short], long]), torch.tensor([[0, 0, 0, 1, 1, 1], [1] * 6])
        )
        torch.testing.assert_close(
            batched[0, 3:], model(torch.tensor([short]))[0], atol=1e-5, rtol=0
        )
    dense = build_model(dataclasses.replace(CFG, moe_experts=0), seed=0)
    assert not any("router" in name for name, _ in dense.named_parameters())
    n_moe = sum(p.numel() for name, p in model.named_parameters() if "ffn" in name)
    n_dense = sum(p.numel() for name, p in dense.named_parameters() if "ffn" in name)
    assert n_moe > n_dense  # 4 experts of half width: 2x the FFN weights, the same active width


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"moe_experts": -1}, "moe_experts"),
        ({"moe_experts": 2, "moe_top_k": 3}, "moe_top_k"),
        ({"moe_experts": 2, "moe_top_k": 0}, "moe_top_k"),
        ({"router_noise": -0.1}, "router_noise"),
    ],
)
def test_moe_config_is_validated(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ModelConfig(vocab_size=8, **kwargs)
