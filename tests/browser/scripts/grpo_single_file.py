"""A single-file GRPO trainer of 12 stages, as a user writes one: `main` calls every stage.

Each stage is a `flowmap.seam`, named after the user's function, and `main`
hands each stage's result to the next: drawn as seams, a star around `main`;
drawn as the flow, the pipeline. The new weights go back to the rollout model
each step (the loop a picture must close). Tiny tensors, CPU, a few seconds.
"""

from __future__ import annotations

import sys

import torch

import flowmap

PROMPTS, GROUP, PROMPT_LEN, GEN_LEN, VOCAB, HIDDEN = 4, 4, 8, 12, 32, 16


@flowmap.seam("load_prompts")
def load_prompts(step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    return torch.randint(0, VOCAB, (PROMPTS, PROMPT_LEN), generator=g)


@flowmap.seam("repeat_for_group")
def repeat_for_group(prompt_ids: torch.Tensor) -> torch.Tensor:
    return prompt_ids.repeat_interleave(GROUP, dim=0)


@flowmap.seam("generate")
def generate(weights: dict[str, torch.Tensor], input_ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        logits = torch.func.functional_call(ROLLOUT, weights, (input_ids[:, -1:],)).squeeze(1)
        new = torch.multinomial(torch.softmax(logits, -1), GEN_LEN, replacement=True)
    return torch.cat([input_ids, new], dim=1)


@flowmap.seam("zero_pad_sequences")
def zero_pad_sequences(sequences: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pad(sequences, (0, 4))


@flowmap.seam("compute_rewards")
def compute_rewards(sequences: torch.Tensor) -> torch.Tensor:
    return (sequences[:, PROMPT_LEN:] % 2 == 0).float().mean(dim=1)


@flowmap.seam("group_advantages")
def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    r = rewards.view(PROMPTS, GROUP)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).flatten()


@flowmap.seam("reference_logprobs")
def reference_logprobs(ref: torch.nn.Module, sequences: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.log_softmax(ref(sequences), -1).max(-1).values


class ReplayBuffer:
    def __init__(self) -> None:
        self.items: list[tuple[torch.Tensor, ...]] = []

    @flowmap.seam("ReplayBuffer.append")
    def append(self, sequences: torch.Tensor, advantages: torch.Tensor, ref_logprobs: torch.Tensor) -> None:
        self.items = [(sequences, advantages, ref_logprobs)]

    @flowmap.seam("ReplayBuffer.sample")
    def sample(self) -> tuple[torch.Tensor, ...]:
        return self.items[-1]


@flowmap.seam("policy_logprobs")
def policy_logprobs(policy: torch.nn.Module, sequences: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(policy(sequences), -1).max(-1).values


@flowmap.seam("grpo_loss")
def grpo_loss(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    kl = (logprobs - ref_logprobs).mean()
    return -(logprobs.mean(1) * advantages).mean() + 0.04 * kl


@flowmap.seam("optimizer_step")
def optimizer_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


@flowmap.seam("sync_weights")
def sync_weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in state.items()}


def model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Embedding(VOCAB, HIDDEN), torch.nn.Linear(HIDDEN, VOCAB))


ROLLOUT = model()  # the inference engine's copy of the policy: new weights each step


def main(steps: int) -> None:
    torch.manual_seed(0)
    policy, ref = model(), model()
    weights = dict(ROLLOUT.state_dict())  # the engine's own weights until the first sync
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    buffer = ReplayBuffer()
    for step in range(steps):
        flowmap.step(step)
        prompts = repeat_for_group(load_prompts(step))
        sequences = zero_pad_sequences(generate(weights, prompts))
        advantages = group_advantages(compute_rewards(sequences))
        buffer.append(sequences, advantages, reference_logprobs(ref, sequences))
        seqs, adv, ref_lp = buffer.sample()
        loss = grpo_loss(policy_logprobs(policy, seqs), ref_lp, adv)
        optimizer_step(loss, optimizer)
        weights = sync_weights(policy.state_dict())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
