"""A GRPO loop at a script's top level, fed by a DataLoader with two worker processes.

No flowmap import, no seam: `flowmap trace` alone must find the stages, though
the loader's workers send batches to the driver from the first step. Shaped
like minimal_grpo_bharath2: a model wrapper whose `generate` and
`compute_log_probs` are called on the policy and on a frozen reference, and a
loss module, on a tiny random model on CPU.
"""

from __future__ import annotations

import argparse
import copy
import itertools

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, PROMPT_LEN, GEN_LEN, GROUP = 20, 4, 6, 4


class Prompts(Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.arange(i, i + PROMPT_LEN) % (VOCAB - 1) + 1


class TinyLM(nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.head = nn.Linear(dim, VOCAB)

    def generate(self, prompts: torch.Tensor) -> torch.Tensor:
        seq = prompts.repeat_interleave(GROUP, dim=0)
        with torch.no_grad():
            for _ in range(GEN_LEN):
                nxt = torch.multinomial(F.softmax(self.head(self.embed(seq)).mean(1), -1), 1)
                seq = torch.cat([seq, nxt], dim=1)
        return seq

    def compute_log_probs(self, seq: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.embed(seq[:, :-1]))
        return F.log_softmax(logits, -1).gather(-1, seq[:, 1:].unsqueeze(-1)).squeeze(-1)


class PolicyLoss(nn.Module):
    def forward(self, log_probs: torch.Tensor, old: torch.Tensor, ref: torch.Tensor,
                adv: torch.Tensor) -> torch.Tensor:
        ratio = torch.exp(log_probs - old)
        kl = torch.exp(ref - log_probs) - (ref - log_probs) - 1
        return -(torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv) - 0.04 * kl).mean()


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6, help="optimizer updates (0: forever)")
args = parser.parse_args()
torch.manual_seed(0)
llm = TinyLM()
llm_ref = copy.deepcopy(llm)
loss_fn = PolicyLoss()
optimizer = torch.optim.AdamW(llm.parameters(), lr=1e-3)
step = 0
for _epoch in itertools.count() if args.steps == 0 else range(1):  # 0: forever, as a job runs
    for prompts in DataLoader(Prompts(), batch_size=2, num_workers=2):
        seq = llm.generate(prompts)
        rewards = (seq[:, PROMPT_LEN:] % 2 == 0).float().mean(1)
        adv = ((rewards - rewards.mean()) / (rewards.std() + 1e-6)).unsqueeze(1)
        with torch.no_grad():
            old = llm.compute_log_probs(seq)
            ref = llm_ref.compute_log_probs(seq)
        loss = loss_fn(llm.compute_log_probs(seq), old, ref, adv)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        print(f"step {step}: loss={loss.item():.4f}")
        if args.steps and step >= args.steps:
            break
