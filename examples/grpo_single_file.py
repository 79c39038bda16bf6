"""A single-file GRPO trainer, in the shape of the small public ones (tiny-grpo and the like).

A tiny causal LM learns to answer "repeat the last digit"-style prompts: a rollout samples a
group of completions per prompt, rewards score them, group advantages normalise the rewards,
the old and the reference log-probs are computed, experiences go into a replay buffer
(`ReplayBuffer.append`) padded by `zero_pad_sequences`, and the GRPO loss trains the policy
with one optimizer step per batch. Runs on CPU in seconds with nothing downloaded;
`flowmap trace examples/grpo_single_file.py` shows the stages without a seam map.
"""

import argparse
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser(description="GRPO on a tiny model")
parser.add_argument("--steps", type=int, default=12, help="optimizer updates (0: forever)")
parser.add_argument("--group-size", type=int, default=4)
parser.add_argument("--seed", type=int, default=42)
args = parser.parse_args()

VOCAB, PROMPT_LEN, GEN_LEN = 16, 6, 8


class TinyLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask=None):
        hidden, _ = self.mix(self.embed(input_ids))
        return self.head(hidden)


@dataclass
class Experience:
    sequences: torch.Tensor
    action_log_probs: torch.Tensor
    log_probs_ref: torch.Tensor
    returns: torch.Tensor
    advantages: torch.Tensor
    action_mask: torch.Tensor


def zero_pad_sequences(sequences, side="left"):
    longest = max(seq.size(-1) for seq in sequences)
    padded = []
    for seq in sequences:
        pad = longest - seq.size(-1)
        padded.append(F.pad(seq, (pad, 0) if side == "left" else (0, pad)))
    return torch.stack(padded, dim=0)


class ReplayBuffer:
    def __init__(self, limit=0):
        self.limit = limit
        self.items = []

    def append(self, experience):
        for i in range(experience.sequences.size(0)):
            self.items.append(Experience(*(getattr(experience, f)[i] for f in Experience.__dataclass_fields__)))
        if self.limit and len(self.items) > self.limit:
            self.items = self.items[-self.limit:]

    def clear(self):
        self.items.clear()

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def join_experience_batch(items):
    fields = {f: zero_pad_sequences([getattr(e, f) for e in items]) for f in Experience.__dataclass_fields__}
    return Experience(**fields)


@torch.no_grad()
def rollout(model, prompt, group_size):
    seq = prompt.repeat(group_size, 1)
    for _ in range(GEN_LEN):
        logits = model(seq)[:, -1]
        nxt = torch.multinomial(F.softmax(logits, dim=-1), 1)
        seq = torch.cat([seq, nxt], dim=1)
    action_mask = torch.zeros_like(seq, dtype=torch.bool)
    action_mask[:, PROMPT_LEN:] = True
    return seq, action_mask[:, 1:]


def compute_rewards(sequences, prompt):
    target = prompt[0, -1]
    completion = sequences[:, PROMPT_LEN:]
    return (completion == target).float().mean(dim=1, keepdim=True)


def group_advantages(returns, eps=1e-8):
    return (returns - returns.mean()) / (returns.std() + eps)


def sequences_log_probs(model, sequences, attention_mask=None):
    logits = model(sequences, attention_mask)[:, :-1].float()
    log_probs = F.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, sequences[:, 1:].unsqueeze(-1)).squeeze(-1)


def approx_kl_divergence(log_probs, log_probs_ref, action_mask):
    log_ratio = (log_probs_ref.float() - log_probs.float()) * action_mask
    return log_ratio.exp() - log_ratio - 1


def masked_mean(tensor, mask, dim=None):
    return (tensor * mask).sum(dim) / mask.sum(dim)


class GRPOLoss(nn.Module):
    def __init__(self, clip_eps=0.2, kl_weight=0.01):
        super().__init__()
        self.clip_eps, self.kl_weight = clip_eps, kl_weight

    def forward(self, log_probs, experience):
        kl = approx_kl_divergence(log_probs, experience.log_probs_ref, experience.action_mask)
        ratio = (log_probs - experience.action_log_probs).exp()
        surr1 = ratio * experience.advantages
        surr2 = ratio.clamp(1 - self.clip_eps, 1 + self.clip_eps) * experience.advantages
        loss = -torch.min(surr1, surr2) + self.kl_weight * kl
        return masked_mean(loss, experience.action_mask, dim=-1).mean(), kl.mean()


def main():
    torch.manual_seed(args.seed)
    model = TinyLM()
    reference = TinyLM()
    reference.load_state_dict(model.state_dict())
    reference.eval()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    objective = GRPOLoss()
    buffer = ReplayBuffer()
    step = 0
    while not args.steps or step < args.steps:
        prompts = torch.randint(1, VOCAB, (2, PROMPT_LEN))
        buffer.clear()
        model.eval()
        for prompt in prompts:
            sequences, action_mask = rollout(model, prompt[None], args.group_size)
            returns = compute_rewards(sequences, prompt[None])
            advantages = group_advantages(returns)
            with torch.no_grad():
                old_log_probs = sequences_log_probs(model, sequences)
                ref_log_probs = sequences_log_probs(reference, sequences)
            buffer.append(Experience(sequences, old_log_probs, ref_log_probs, returns,
                                     advantages, action_mask))
        model.train()
        batch = join_experience_batch(buffer.items)
        optimizer.zero_grad()
        log_probs = sequences_log_probs(model, batch.sequences)
        loss, kl = objective(log_probs, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        print(f"step {step}: loss={loss.item():.4f} kl={kl.item():.4f} "
              f"reward={batch.returns.mean().item():.3f}")


if __name__ == "__main__":
    main()
