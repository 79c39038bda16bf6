"""The multi-turn environment: it answers between the model's turns, and may fork.

After each model turn the environment judges it, says so (`y`/`n`), and asks
the next question. With probability `fork_prob` it asks *several* different
next questions instead of one: the trajectory forks, and each branch goes on
as its own request (see trainer/tree.py for how the tree becomes rows).

The environment keeps no state of its own between calls: everything it needs
is in the tree, and its randomness is seeded by the row and the node's place in
the tree, so the same rollout gives the same replies whatever order the
branches finish in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from flowmap.trainer.config import TaskConfig
from flowmap.trainer.task import CountingTask, EnvGroup
from flowmap.trainer.tree import TrajectoryTree


@dataclass(slots=True)
class TurnRequest:
    """What the environment asks the model next: one branch's next turn."""

    traj_id: str
    branch_id: str  # the leaf id this branch will have
    parent: int | None  # node the model's answer attaches under (None: first turn)
    prompt_token_ids: list[int]  # the whole context so far: what the engine is given
    reply_token_ids: list[int]  # what the environment just said (empty before the first turn)
    expected: str  # the verifiable right answer of this turn


class CountingEnv:
    """Replies of the counting game, with forks."""

    def __init__(self, task: CountingTask, cfg: TaskConfig) -> None:
        self.task = task
        self.cfg = cfg
        self.tokenizer = task.tokenizer

    def reset(self, group: EnvGroup, sample_index: int) -> tuple[TrajectoryTree, TurnRequest]:
        """A new trajectory of `group` and its first turn."""
        traj_id = f"g{group.index}-t{sample_index}"
        prompt = [self.tokenizer.bos_id] + self.tokenizer.encode(self.task.question(group.first_digit))
        tree = TrajectoryTree(traj_id, group.uid, prompt, f"{group.env_seed}:{sample_index}")
        first = TurnRequest(
            traj_id, traj_id, None, list(prompt), [], self.task.expected(group.first_digit)
        )
        return tree, first

    def step(self, tree: TrajectoryTree, turn_node: int) -> list[TurnRequest]:
        """Answer the model turn `turn_node`: the next turn(s), or [] when the branch is done."""
        path = tree.path(turn_node)
        num_turns_done = sum(n.generated for n in path)
        if num_turns_done >= self.cfg.num_turns:
            return []
        turn = tree.nodes[turn_node]
        correct = self.task.is_correct(turn.tokens, turn.expected or "")
        rng = random.Random(f"{tree.env_seed}:{turn.path_key}")
        width = self.cfg.fork_width if rng.random() < self.cfg.fork_prob else 1
        requests = []
        for k in range(width):
            digit = rng.randrange(10)
            reply = self.tokenizer.encode(self.task.reply(correct, digit))
            branch_id = turn.branch_id if k == 0 else _new_branch_id(tree)
            node = tree.add(turn_node, branch_id, reply, generated=False)
            requests.append(
                TurnRequest(
                    tree.traj_id, branch_id, node, tree.context(node), reply, self.task.expected(digit)
                )
            )
        return requests


def _new_branch_id(tree: TrajectoryTree) -> str:
    """`<traj_id>~k`, k counting the branches this trajectory has forked off so far."""
    k = 1 + len({n.branch_id for n in tree.nodes} - {tree.traj_id})
    return f"{tree.traj_id}~{k}"
