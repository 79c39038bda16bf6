"""examples/seam_map_pipeline.py with its seams recorded by explicit flowmap calls.

The twin of the seam-mapped pipeline: same code, same seams, but written into
the program with flowmap's public API — what `seam_map_pipeline.yaml` does
for you without an edit. `tests/integration/test_seam_map_pipeline.py` traces
both and checks they give the same seams, leaves and bytes.

    flowmap trace examples/seam_map_pipeline_instrumented.py
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import flowmap

PROMPTS_PER_STEP = 4
GROUP_SIZE = 4  # completions per prompt (GRPO's n)
PROMPT_TOKENS = 16
COMPLETION_TOKENS = 32
VOCAB = 64
HIDDEN = 32
STEPS = 3


@dataclass
class Prompts:
    uid: list[str]  # one group id per prompt
    prompt_ids: torch.Tensor  # (P, prompt_tokens) int64


@dataclass
class Trajectories:
    uid: list[str]  # one per completion, repeated GROUP_SIZE times per prompt
    tokens: torch.Tensor  # (P*G, prompt_tokens + completion_tokens) int64
    logprobs: torch.Tensor  # (P*G, completion_tokens) float32
    completion_mask: torch.Tensor  # (P*G, completion_tokens) bool


@dataclass
class TrainBatch:
    uid: list[str]
    tokens: torch.Tensor
    logprobs: torch.Tensor
    completion_mask: torch.Tensor
    rewards: torch.Tensor  # (P*G,) float32


class PromptDataset:
    def __init__(self, seed: int = 0) -> None:
        self.gen = torch.Generator().manual_seed(seed)
        self.served = 0

    def sample(self, batch_size: int) -> Prompts:
        caller = flowmap.current_owner()
        flowmap.hop(caller, "dataset", {"batch_size": batch_size}, name="prompt_request")
        with flowmap.owner("dataset"):
            out = self._sample(batch_size)
        flowmap.hop("dataset", caller, {"result": out}, name="prompts", items=out.uid,
                    dims={"result.prompt_ids": ("prompts", "prompt_tokens")})
        return out

    def _sample(self, batch_size: int) -> Prompts:
        ids = torch.randint(0, VOCAB, (batch_size, PROMPT_TOKENS), generator=self.gen)
        uid = [f"p{self.served + i}" for i in range(batch_size)]
        self.served += batch_size
        return Prompts(uid, ids)


class RolloutWorker:
    def __init__(self) -> None:
        self.policy = torch.nn.Embedding(VOCAB, HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)
        self.version = 0

    def generate(self, prompts: Prompts) -> Trajectories:
        caller = flowmap.current_owner()
        flowmap.hop(caller, "rollout", {"prompts": prompts}, name="prompts", items=prompts.uid,
                    dims={"prompts.prompt_ids": ("prompts", "prompt_tokens")})
        with flowmap.owner("rollout"):
            out = self._generate(prompts)
        flowmap.hop("rollout", caller, {"result": out}, name="trajectories", dims={
            "result.tokens": ("samples", "tokens"),
            "result.logprobs": ("samples", "completion_tokens"),
            "result.completion_mask": ("samples", "completion_tokens"),
        })
        return out

    @torch.no_grad()
    def _generate(self, prompts: Prompts) -> Trajectories:
        tokens = prompts.prompt_ids.repeat_interleave(GROUP_SIZE, dim=0)  # (P*G, prompt_tokens)
        logprobs = []
        for _ in range(COMPLETION_TOKENS):
            logp = torch.log_softmax(self.head(self.policy(tokens[:, -1])), dim=-1)  # (P*G, vocab)
            nxt = torch.multinomial(logp.exp(), 1)[:, 0]  # (P*G,)
            logprobs.append(logp.gather(1, nxt[:, None])[:, 0])
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        uid = [u for u in prompts.uid for _ in range(GROUP_SIZE)]
        mask = torch.ones(len(uid), COMPLETION_TOKENS, dtype=torch.bool)
        return Trajectories(uid, tokens, torch.stack(logprobs, dim=1), mask)

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        self.policy.weight.data.copy_(state["policy.weight"])
        self.head.load_state_dict({"weight": state["head.weight"], "bias": state["head.bias"]})
        self.version += 1


def score(trajectories: Trajectories) -> torch.Tensor:
    """A verifiable toy reward: the fraction of even tokens in the completion."""
    caller = flowmap.current_owner()
    flowmap.hop(caller, "reward", {"trajectories": trajectories}, name="trajectories",
                items=trajectories.uid)
    with flowmap.owner("reward"):
        out = _score(trajectories)
    flowmap.hop("reward", caller, {"result": out}, name="rewards", dims={"result": ("samples",)})
    return out


def _score(trajectories: Trajectories) -> torch.Tensor:
    completion = trajectories.tokens[:, PROMPT_TOKENS:]
    return (completion % 2 == 0).float().mean(dim=1)  # (P*G,)


@flowmap.seam("advantage", name="advantages", args=["rewards"])
def group_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """GRPO: normalise each reward within its group of completions of one prompt."""
    grouped = rewards.view(-1, group_size)  # (P, G)
    adv = (grouped - grouped.mean(dim=1, keepdim=True)) / (grouped.std(dim=1, keepdim=True) + 1e-4)
    return adv.reshape(-1)  # (P*G,)


class Learner:
    def __init__(self, rollout: RolloutWorker) -> None:
        self.policy = torch.nn.Embedding(VOCAB, HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)
        self.policy.load_state_dict(rollout.policy.state_dict())
        self.head.load_state_dict(rollout.head.state_dict())
        params = list(self.policy.parameters()) + list(self.head.parameters())
        self.opt = torch.optim.SGD(params, lr=0.1)
        self.step = 0

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        caller = flowmap.current_owner()
        flowmap.step(self.step)
        flowmap.hop(caller, "trainer", {"batch": batch}, name="train_batch", items=batch.uid, dims={
            "batch.tokens": ("samples", "tokens"),
            "batch.logprobs": ("samples", "completion_tokens"),
        })
        with flowmap.owner("trainer"):
            out = self._train_step(batch)
        flowmap.hop("trainer", caller, {"result": out}, name="metrics")
        return out

    def _train_step(self, batch: TrainBatch) -> dict[str, float]:
        adv = group_advantages(batch.rewards, GROUP_SIZE)  # (P*G,)
        inputs = batch.tokens[:, PROMPT_TOKENS - 1 : -1]  # (P*G, completion_tokens)
        targets = batch.tokens[:, PROMPT_TOKENS:]
        logits = self.head(self.policy(inputs))  # (P*G, completion_tokens, vocab)
        logp = torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None])[..., 0]
        mask = batch.completion_mask.float()
        loss = -((logp * adv[:, None]) * mask).sum() / mask.sum()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.step += 1
        return {"loss": float(loss.detach()), "reward": float(batch.rewards.mean())}

    def weights(self) -> dict[str, torch.Tensor]:
        return {
            "policy.weight": self.policy.weight.detach(),
            "head.weight": self.head.weight.detach(),
            "head.bias": self.head.bias.detach(),
        }


class WeightSync:
    @flowmap.seam("weight_sync", name="weights", args=["state"], result=False)
    def push(self, state: dict[str, torch.Tensor], rollout: RolloutWorker) -> None:
        rollout.load_weights(state)


def main() -> None:
    torch.manual_seed(0)
    dataset = PromptDataset()
    rollout = RolloutWorker()
    learner = Learner(rollout)
    sync = WeightSync()
    for _ in range(STEPS):
        prompts = dataset.sample(PROMPTS_PER_STEP)
        traj = rollout.generate(prompts)
        rewards = score(traj)
        batch = TrainBatch(traj.uid, traj.tokens, traj.logprobs, traj.completion_mask, rewards)
        metrics = learner.train_step(batch)
        sync.push(learner.weights(), rollout)
        print(f"step {learner.step}: loss {metrics['loss']:+.4f} reward {metrics['reward']:.3f}")


if __name__ == "__main__":
    main()
