"""An actor-critic script shaped like pytorch/examples' `actor_critic.py`, on a toy environment.

`main` runs episodes: the environment and the policy trade observations and
actions step by step, the episode's log-probs and values are saved, and at its
end the returns, the loss and the optimizer step learn from them. Stages are
`flowmap.seam`s named after the user's functions; everything goes through `main`.
"""

from __future__ import annotations

import sys

import torch

import flowmap

OBS, ACTIONS, HIDDEN, EPISODE_LEN, GAMMA = 4, 2, 32, 12, 0.99


class ToyEnv:
    def __init__(self) -> None:
        self.g = torch.Generator().manual_seed(0)
        self.t = 0

    @flowmap.seam("ToyEnv.reset")
    def reset(self) -> torch.Tensor:
        self.t = 0
        return torch.randn(OBS, generator=self.g)

    @flowmap.seam("ToyEnv.step")
    def step(self, action: int) -> tuple[torch.Tensor, float, bool]:
        self.t += 1
        return torch.randn(OBS, generator=self.g), float(action == self.t % 2), self.t >= EPISODE_LEN


class Policy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Linear(OBS, HIDDEN)
        self.actor = torch.nn.Linear(HIDDEN, ACTIONS)
        self.critic = torch.nn.Linear(HIDDEN, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.relu(self.body(obs))
        return torch.softmax(self.actor(h), -1), self.critic(h)


@flowmap.seam("select_action")
def select_action(policy: Policy, obs: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
    probs, value = policy(obs)
    dist = torch.distributions.Categorical(probs)
    action = dist.sample()
    return int(action), dist.log_prob(action), value


@flowmap.seam("discounted_returns")
def discounted_returns(rewards: list[float]) -> torch.Tensor:
    out, r = [], 0.0
    for x in reversed(rewards):
        r = x + GAMMA * r
        out.insert(0, r)
    t = torch.tensor(out)
    return (t - t.mean()) / (t.std() + 1e-6)


@flowmap.seam("actor_critic_loss")
def actor_critic_loss(log_probs: torch.Tensor, values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    advantage = returns - values.detach()
    return -(log_probs * advantage).sum() + torch.nn.functional.smooth_l1_loss(values, returns)


@flowmap.seam("optimizer_step")
def optimizer_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def main(episodes: int) -> None:
    torch.manual_seed(0)
    env, policy = ToyEnv(), Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-2)
    for episode in range(episodes):
        flowmap.step(episode)
        obs, done = env.reset(), False
        log_probs, values, rewards = [], [], []
        while not done:
            action, log_prob, value = select_action(policy, obs)
            obs, reward, done = env.step(action)
            log_probs.append(log_prob)
            values.append(value.squeeze())
            rewards.append(reward)
        returns = discounted_returns(rewards)
        loss = actor_critic_loss(torch.stack(log_probs), torch.stack(values), returns)
        optimizer_step(loss, optimizer)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
