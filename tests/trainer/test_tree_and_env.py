"""Trajectory trees: flattening into leaves masks the shared prefix in every leaf after the first."""

from __future__ import annotations

from flowmap.trainer.config import TaskConfig
from flowmap.trainer.env import CountingEnv
from flowmap.trainer.task import CountingTask, EnvGroup, make_tokenizer
from flowmap.trainer.tree import TrajectoryTree, flatten


def _forked_tree() -> TrajectoryTree:
    """prompt [1, 9] -> turn A -> env R1 -> turn B                   (leaf "t")
                              -> env R2 -> turn C -> env R3 -> D   (leaf "t~1")
                                                  -> env R4 -> E   (leaf "t~2": a fork of a fork)
    As token ids: A=[10, 2], R1=[20], B=[11, 2], R2=[21], C=[12, 2], R3=[22], D=[13, 2],
    R4=[23], E=[14, 2].
    """
    tree = TrajectoryTree("t", "u", [1, 9])
    a = tree.add(None, "t", [10, 2], generated=True, logprobs=[-0.1, -0.2], expected="x")
    r1 = tree.add(a, "t", [20], generated=False)
    tree.add(r1, "t", [11, 2], generated=True, logprobs=[-0.3, -0.4], expected="y")
    r2 = tree.add(a, "t~1", [21], generated=False)
    c = tree.add(r2, "t~1", [12, 2], generated=True, logprobs=[-0.5, -0.6], expected="z")
    r3 = tree.add(c, "t~1", [22], generated=False)
    tree.add(r3, "t~1", [13, 2], generated=True, logprobs=[-0.7, -0.8], expected="w")
    r4 = tree.add(c, "t~2", [23], generated=False)
    tree.add(r4, "t~2", [14, 2], generated=True, logprobs=[-0.9, -1.0], expected="v")
    return tree


def test_first_leaf_trains_on_its_whole_path() -> None:
    first = flatten(_forked_tree())[0]
    assert first.leaf_id == "t"
    assert first.prompt_token_ids == [1, 9]
    assert first.response_token_ids == [10, 2, 20, 11, 2]
    assert first.response_mask == [1, 1, 0, 1, 1]  # env reply never trained on
    assert first.rollout_log_probs == [-0.1, -0.2, 0.0, -0.3, -0.4]


def test_later_leaves_mask_the_shared_prefix() -> None:
    leaves = flatten(_forked_tree())
    assert [x.leaf_id for x in leaves] == ["t", "t~1", "t~2"]
    second, third = leaves[1], leaves[2]
    # A is shared with the first leaf: masked; C and D are this leaf's own turns.
    assert second.response_token_ids == [10, 2, 21, 12, 2, 22, 13, 2]
    assert second.response_mask == [0, 0, 0, 1, 1, 0, 1, 1]
    # A and C belong to earlier leaves: only E is trained on.
    assert third.response_token_ids == [10, 2, 21, 12, 2, 23, 14, 2]
    assert third.response_mask == [0, 0, 0, 0, 0, 0, 1, 1]
    assert third.rollout_log_probs[-2:] == [-0.9, -1.0]
    # every generated token (5 turns x 2) is trained on exactly once across the leaves
    assert sum(sum(x.response_mask) for x in leaves) == 10


def test_leaves_keep_every_turn_for_the_verifier() -> None:
    third = flatten(_forked_tree())[2]
    assert third.turn_outputs == [[10, 2], [12, 2], [14, 2]]
    assert third.expected == ["x", "z", "v"]


def test_env_forks_deterministically_and_answers_between_turns() -> None:
    task = CountingTask(make_tokenizer())
    env = CountingEnv(task, TaskConfig(num_turns=2, fork_prob=1.0, fork_width=2))
    tok = task.tokenizer
    group = EnvGroup("u", 0, first_digit=3, env_seed=7)

    def play() -> list:
        tree, first = env.reset(group, 0)
        assert tok.decode(first.prompt_token_ids) == "+1:3" and first.expected == "4"
        node = tree.add(first.parent, first.branch_id, tok.encode("4") + [tok.eos_id],
                        generated=True, expected=first.expected)
        return env.step(tree, node)

    replies = play()
    assert [r.branch_id for r in replies] == ["g0-t0", "g0-t0~1"]
    for r in replies:
        text = tok.decode(r.reply_token_ids)
        assert text.startswith("y;+1:")  # right answer, then the next question
        assert r.expected == str((int(text[-1]) + 1) % 10)
        assert r.prompt_token_ids[-len(r.reply_token_ids):] == r.reply_token_ids
    assert [r.reply_token_ids for r in play()] == [r.reply_token_ids for r in replies]


def test_env_ends_a_branch_after_the_last_turn() -> None:
    task = CountingTask(make_tokenizer())
    env = CountingEnv(task, TaskConfig(num_turns=1))
    tree, first = env.reset(EnvGroup("u", 0, 1, 1), 0)
    node = tree.add(None, first.branch_id, [task.tokenizer.eos_id], generated=True)
    assert env.step(tree, node) == []
