"""Sampling parameters and the sampler: temperature, top-p, per-token log-probs.

The log-prob recorded for a token is under the model's tempered distribution,
log_softmax(logits / temperature), before top-p truncation: that is the
behaviour policy the trainer's importance ratio compares against (greedy rows
use temperature 1). Top-p only narrows which token is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(slots=True)
class SamplingParams:
    """How to sample one request; `temperature == 0` means greedy."""

    temperature: float = 1.0
    top_p: float = 1.0  # keep the smallest set of tokens whose probability reaches top_p
    n: int = 1  # samples per request; sample i is named f"{request_id}#{i}"
    max_tokens: int = 32  # output tokens at most; finish_reason "length" when reached
    stop_token_ids: tuple[int, ...] = ()  # a sampled stop token is kept and ends the sequence
    seed: int | None = None  # per-request random stream, independent of batching

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        self.stop_token_ids = tuple(int(t) for t in self.stop_token_ids)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def sample_generator(seed: int, index: int) -> torch.Generator:
    """The random stream of sample `index` of a seeded request (distinct per sample)."""
    mixed = (seed * 0x9E3779B97F4A7C15 + index) % (2**63)  # golden-ratio mix: (s, i) != (s+1, i-1)
    return torch.Generator().manual_seed(mixed)


def top_p_filter(probs: Tensor, top_p: Tensor) -> Tensor:
    """probs (B, V) with the tail beyond each row's nucleus zeroed; top_p (B,). The top token always stays."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (B, V) probability above each token
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p[:, None], 0.0)
    return torch.zeros_like(probs).scatter_(-1, order, sorted_probs)


def sample(
    logits: Tensor,
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator | None],
    default_generator: torch.Generator,
) -> tuple[list[int], list[float]]:
    """One token and its log-prob per row of logits (B, V).

    Rows draw from their own generator when the request is seeded, else from
    `default_generator`; each row draws exactly V exponentials, so a seeded
    request's tokens do not depend on what else is in the batch.
    """
    logits = logits.float()
    temperature = torch.tensor([p.temperature or 1.0 for p in params])  # (B,) greedy -> 1
    logprobs = torch.log_softmax(logits / temperature[:, None], dim=-1)  # (B, V)
    tokens = logits.argmax(dim=-1)  # (B,) greedy choice
    sampled_rows = [i for i, p in enumerate(params) if not p.greedy]
    if sampled_rows:
        rows = torch.tensor(sampled_rows)
        probs = logprobs[rows].exp()  # (S, V)
        top_p = [params[i].top_p for i in sampled_rows]
        if min(top_p) < 1.0:  # the sort is most of the sampler's cost; skip it when unused
            probs = top_p_filter(probs, torch.tensor(top_p))
        # Exponential race: argmax(p / E), E ~ Exp(1), draws token t with probability p_t.
        race = torch.empty_like(probs)
        for j, i in enumerate(sampled_rows):
            race[j].exponential_(generator=generators[i] or default_generator)
        tokens[rows] = (probs / race).argmax(dim=-1)
    chosen = logprobs.gather(-1, tokens[:, None]).squeeze(-1)  # (B,)
    return tokens.tolist(), chosen.tolist()
