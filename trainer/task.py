"""The counting game: a toy task whose reward a few lines of code can verify.

Each turn shows a digit and asks for the next one, modulo 10:

    prompt   "+1:3"          the model answers "4<eos>"
    env      "y;+1:7"        feedback on the last answer (y/n), then a new digit
    model    "8<eos>"

Why this task: TinyLM learns the skill (a ten-entry table read off one token)
in a couple of hundred supervised steps, so a short warm-up on *noisy*
demonstrations (most answers random) leaves a policy that knows the format
and is right about a third of the time. Reinforcement then has a real,
measurable job: push the right answer's probability up from there, within a
minute of CPU time. The reward is the share of turns answered right, in [0, 1].
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from flowmap.trainer.tokenizer import CharTokenizer

ALPHABET = "0123456789+:;yn"  # digits, the question's "+1:", the env's separator and feedback


def make_tokenizer() -> CharTokenizer:
    return CharTokenizer(ALPHABET)


@dataclass(slots=True)
class EnvGroup:
    """One dataset row: an environment setting sampled `n` times (GRPO's group)."""

    uid: str  # group id shared by every trajectory (and leaf) sampled from this row
    index: int  # row number in the dataset stream
    first_digit: int  # the digit of the first question
    env_seed: int  # the environment's randomness (later digits, forks) for this row


class CountingTask:
    """Texts of the game and the verifier of answers."""

    def __init__(self, tokenizer: CharTokenizer) -> None:
        self.tokenizer = tokenizer

    @staticmethod
    def question(digit: int) -> str:
        # The digit comes last, so the answer is read off the last prompt token.
        return f"+1:{digit}"

    @staticmethod
    def expected(digit: int) -> str:
        return str((digit + 1) % 10)

    def reply(self, last_correct: bool, next_digit: int) -> str:
        """What the environment says between turns: feedback, separator, next question."""
        return ("y" if last_correct else "n") + ";" + self.question(next_digit)

    def is_correct(self, output_token_ids: list[int], expected: str) -> bool:
        """Right iff the turn is exactly the expected digit followed by <eos>."""
        eos = self.tokenizer.eos_id
        if not output_token_ids or output_token_ids[-1] != eos:
            return False
        return output_token_ids[:-1] == self.tokenizer.encode(expected)

    @staticmethod
    def score(turns_correct: list[bool]) -> float:
        """The verifiable reward of a leaf trajectory: share of its turns answered right."""
        return sum(turns_correct) / len(turns_correct) if turns_correct else 0.0


class Dataset:
    """An endless, seeded stream of env groups (the loop's `dataset` owner reads from it)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_index = 0

    def next_group(self) -> EnvGroup:
        index = self.next_index
        self.next_index += 1
        uid = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))  # verl: uuid4 per prompt
        return EnvGroup(uid, index, self.rng.randrange(10), self.rng.getrandbits(32))
