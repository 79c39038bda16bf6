"""An advantage actor-critic loop with a replay list, written as plain functions at top level.

No flowmap import, no seam: `flowmap trace` alone must find the stages. Unlike
examples/actor_critic.py the actor and critic are one module with two heads,
each transition is a namedtuple appended to a list the driver owns, and
`update(replay)` learns from that list with RMSprop after each episode.
"""

from __future__ import annotations

import argparse
from collections import namedtuple

import torch
import torch.nn.functional as F
from torch import nn

Transition = namedtuple("Transition", ["log_prob", "value", "reward"])


class GridWalk:
    """Walk a 1-D corridor to the right end; the observation is a one-hot position."""

    def __init__(self, size: int = 8, limit: int = 30) -> None:
        self.size, self.limit = size, limit
        self.pos = self.t = 0

    def reset(self) -> torch.Tensor:
        self.pos = self.t = 0
        return F.one_hot(torch.tensor(self.pos), self.size).float()

    def step(self, action: int) -> tuple[torch.Tensor, float, bool]:
        self.pos = max(0, min(self.size - 1, self.pos + (1 if action == 1 else -1)))
        self.t += 1
        done = self.pos == self.size - 1 or self.t >= self.limit
        return F.one_hot(torch.tensor(self.pos), self.size).float(), float(self.pos == self.size - 1), done


class ActorCritic(nn.Module):
    def __init__(self, size: int = 8, hidden: int = 32) -> None:
        super().__init__()
        self.body = nn.Linear(size, hidden)
        self.actor = nn.Linear(hidden, 2)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.relu(self.body(obs))
        return self.actor(h), self.critic(h)


def act(model: ActorCritic, obs: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
    logits, value = model(obs)
    dist = torch.distributions.Categorical(logits=logits)
    action = dist.sample()
    return int(action.item()), dist.log_prob(action), value.squeeze(-1)


def discounted_returns(rewards: list[float], gamma: float = 0.95) -> torch.Tensor:
    out, running = [], 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        out.insert(0, running)
    return torch.tensor(out)


def update(model: ActorCritic, optimizer: torch.optim.Optimizer, replay: list[Transition]) -> float:
    returns = discounted_returns([t.reward for t in replay])
    values = torch.stack([t.value for t in replay])
    log_probs = torch.stack([t.log_prob for t in replay])
    advantage = returns - values.detach()
    loss = -(log_probs * advantage).mean() + F.smooth_l1_loss(values, returns)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return float(loss.item())


def train(episodes: int) -> None:
    torch.manual_seed(0)
    env, model = GridWalk(), ActorCritic()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=7e-3)
    replay: list[Transition] = []
    episode = 0
    while not episodes or episode < episodes:
        obs, done = env.reset(), False
        while not done:
            action, log_prob, value = act(model, obs)
            obs, reward, done = env.step(action)
            replay.append(Transition(log_prob, value, reward))
        loss = update(model, optimizer, replay)
        replay.clear()
        episode += 1
        print(f"episode {episode}: loss={loss:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=10, help="episodes to train (0: forever)")
    train(parser.parse_args().episodes)
