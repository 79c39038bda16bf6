"""The model's configuration, in a module of its own: the model builds its attention
from it, and attention reads it, so neither imports the other to know its shape."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ModelConfig:
    """Sizes of TinyLM; the defaults learn the toy tasks in about a minute on 2 CPU cores."""

    vocab_size: int
    max_seq_len: int = 128  # prompt + response; rows of the learned position table
    d_model: int = 64  # wide enough for the toy tasks, small enough for millisecond CPU steps
    n_layers: int = 2
    n_heads: int = 4  # head_dim 16
    d_ff: int = 256  # 4 * d_model, GPT-2's ratio
    # MoE feed-forward: 0 = the dense MLP. Each expert is d_ff // moe_top_k wide, so a
    # token's active width stays d_ff; 4 experts top-2 is enough to make routing matter.
    moe_experts: int = 0
    moe_top_k: int = 2
    # DSA sparse attention: 0 = dense. Each query attends only the dsa_index_topk past
    # positions its indexer scores highest (V3.2: 2048 of up to 128K; here a few of <= 128).
    dsa_index_topk: int = 0
    dsa_index_dim: int = 16  # indexer key/query width (V3.2: 128)
    dsa_index_heads: int = 2  # indexer heads (V3.2: 64)
    # Std of Gaussian noise added, in train mode only, to router logits and indexer scores:
    # a stand-in for the train/inference numeric drift that replay exists to cancel (tests).
    router_noise: float = 0.0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_seq_len", "d_model", "n_layers", "n_heads", "d_ff"):
            _check_int(name, getattr(self, name), minimum=1)
        for name in ("moe_experts", "dsa_index_topk"):
            _check_int(name, getattr(self, name), minimum=0)
        if self.d_model % self.n_heads:
            raise ValueError(
                f"ModelConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.has_moe:
            _check_int("moe_top_k", self.moe_top_k, minimum=1)
            if self.moe_top_k > self.moe_experts or self.d_ff < self.moe_top_k:
                raise ValueError(
                    f"ModelConfig.moe_top_k ({self.moe_top_k}) must be at most moe_experts "
                    f"({self.moe_experts}) and d_ff ({self.d_ff})"
                )
        if self.has_dsa:
            for name in ("dsa_index_dim", "dsa_index_heads"):
                _check_int(name, getattr(self, name), minimum=1)
        if not self.router_noise >= 0:
            raise ValueError(f"ModelConfig.router_noise must be >= 0, got {self.router_noise!r}")

    @property
    def has_moe(self) -> bool:
        return self.moe_experts > 0

    @property
    def has_dsa(self) -> bool:
        return self.dsa_index_topk > 0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        kind = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"ModelConfig.{name} must be {kind}, got {value!r}")
