"""A GRPO trainer written as one class with a method per stage, as many public trainers are.

No flowmap import, no seam: `flowmap trace` alone must find the stages. Unlike
examples/grpo_single_file.py there is no `main`: `GRPOTrainer.fit` drives,
`train_step` calls each stage method in turn, the group's samples wait in a
list on the trainer (`self.batch`), and AdamW learns. A tiny random model,
on CPU, in a few seconds.
"""

from __future__ import annotations

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PROMPT_LEN, GEN_LEN = 24, 5, 7


class TinyPolicy(nn.Module):
    def __init__(self, dim: int = 48) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.mix(self.embed(tokens)))
        return self.head(torch.cumsum(h, dim=1) / torch.arange(1, tokens.shape[1] + 1).view(1, -1, 1))


class GRPOTrainer:
    def __init__(self, group: int = 6, prompts: int = 2, lr: float = 3e-3, beta: float = 0.02) -> None:
        self.policy = TinyPolicy()
        self.reference = copy.deepcopy(self.policy).eval()
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=lr)
        self.group, self.prompts, self.beta = group, prompts, beta
        self.gen = torch.Generator().manual_seed(7)
        self.batch: list[dict[str, torch.Tensor]] = []

    def sample_prompts(self) -> torch.Tensor:
        p = torch.randint(1, VOCAB, (self.prompts, PROMPT_LEN), generator=self.gen)
        return p.repeat_interleave(self.group, dim=0)

    @torch.no_grad()
    def generate(self, prompts: torch.Tensor) -> torch.Tensor:
        seq = prompts
        for _ in range(GEN_LEN):
            probs = F.softmax(self.policy(seq)[:, -1], dim=-1)
            seq = torch.cat([seq, torch.multinomial(probs, 1, generator=self.gen)], dim=1)
        return seq

    def score(self, sequences: torch.Tensor) -> torch.Tensor:
        completion = sequences[:, PROMPT_LEN:]
        return (completion == sequences[:, :1]).float().mean(dim=1)  # repeat the first token

    def advantages(self, rewards: torch.Tensor) -> torch.Tensor:
        r = rewards.view(-1, self.group)
        return ((r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, keepdim=True) + 1e-6)).view(-1)

    def token_logprobs(self, model: nn.Module, sequences: torch.Tensor) -> torch.Tensor:
        logits = model(sequences[:, :-1])
        logp = F.log_softmax(logits, dim=-1).gather(-1, sequences[:, 1:].unsqueeze(-1)).squeeze(-1)
        return logp[:, PROMPT_LEN - 1:]

    def remember(self, sequences: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor,
                 adv: torch.Tensor) -> None:
        self.batch.append({"sequences": sequences, "old_logp": old_logp, "ref_logp": ref_logp, "adv": adv})

    def policy_loss(self, logp: torch.Tensor, sample: dict[str, torch.Tensor]) -> torch.Tensor:
        ratio = torch.exp(logp - sample["old_logp"])
        adv = sample["adv"].unsqueeze(1)
        clipped = torch.minimum(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv)
        kl = torch.exp(sample["ref_logp"] - logp) - (sample["ref_logp"] - logp) - 1
        return -(clipped - self.beta * kl).mean()

    def train_step(self) -> float:
        prompts = self.sample_prompts()
        sequences = self.generate(prompts)
        rewards = self.score(sequences)
        adv = self.advantages(rewards)
        with torch.no_grad():
            old_logp = self.token_logprobs(self.policy, sequences)
            ref_logp = self.token_logprobs(self.reference, sequences)
        self.remember(sequences, old_logp, ref_logp, adv)
        total = 0.0
        for sample in self.batch:
            logp = self.token_logprobs(self.policy, sample["sequences"])
            loss = self.policy_loss(logp, sample)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        self.batch.clear()
        return total

    def fit(self, steps: int) -> None:
        step = 0
        while not steps or step < steps:
            loss = self.train_step()
            step += 1
            print(f"step {step}: loss={loss:.4f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10, help="optimizer updates (0: forever)")
    torch.manual_seed(0)
    GRPOTrainer().fit(parser.parse_args().steps)
