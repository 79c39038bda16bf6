"""A character tokenizer built from an alphabet: nothing to download, nothing to train.

The toy tasks speak a tiny language (digits, a few operators, a separator), so
one id per character is exact, reversible and readable in a trace. Special ids
come first so they stay fixed whatever the alphabet is:

    pad = 0, bos = 1, eos = 2, then the alphabet in order.
"""

from __future__ import annotations

from collections.abc import Sequence

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")


class CharTokenizer:
    """Maps each character of `alphabet` to one id; `decode` skips the special ids."""

    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    def __init__(self, alphabet: str) -> None:
        if not alphabet:
            raise ValueError("CharTokenizer needs a non-empty alphabet")
        duplicates = sorted({c for c in alphabet if alphabet.count(c) > 1})
        if duplicates:
            raise ValueError(f"alphabet repeats characters {duplicates!r}; list each once")
        self.alphabet = alphabet
        self.num_special_tokens = len(SPECIAL_TOKENS)
        self._char_to_id = {c: i + self.num_special_tokens for i, c in enumerate(alphabet)}
        self.vocab_size = self.num_special_tokens + len(alphabet)

    def encode(self, text: str) -> list[int]:
        """Ids of `text`, one per character, without special tokens."""
        try:
            return [self._char_to_id[c] for c in text]
        except KeyError as exc:
            raise ValueError(
                f"character {exc.args[0]!r} is not in the tokenizer's alphabet {self.alphabet!r}"
            ) from None

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`; pad, bos and eos are skipped so padded rows decode cleanly."""
        chars = []
        for i in ids:
            i = int(i)
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside the vocabulary (size {self.vocab_size})")
            if i >= self.num_special_tokens:
                chars.append(self.alphabet[i - self.num_special_tokens])
        return "".join(chars)

    def __repr__(self) -> str:
        return f"CharTokenizer(alphabet={self.alphabet!r}, vocab_size={self.vocab_size})"
