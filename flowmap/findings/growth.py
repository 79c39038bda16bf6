"""Conversations found in a stream of messages from the shapes alone, for `prefix_resend`.

Within one step, each message's leaf continues the open chain whose last
leading-dimension size is the largest below its own, other dims equal (the
conversation it most likely extends), or opens a chain. The stream counts as
conversations only when the chains look like them (see `prefix_resend`);
otherwise none are returned.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowmap.read.events import Leaf

MIN_TURNS = 3  # mean messages per chain
MIN_COVERED = 0.75  # of the stream's messages in chains of MIN_TURNS or more
MIN_GROWTH = 0.5  # of the chain's first length, per growth


def chains(stream: list[tuple[Leaf, int, Any]]) -> list[list[tuple[Leaf, int]]]:
    """The stream's conversations (each a chain of (leaf, bytes)), or [] when it has none."""
    by_step: dict[Any, list[tuple[Leaf, int]]] = defaultdict(list)
    for leaf, nbytes, step in stream:
        if isinstance(leaf.shape[_axis(leaf.shape)], int):
            by_step[step].append((leaf, nbytes))
    found: list[list[tuple[Leaf, int]]] = []
    for messages in by_step.values():
        found.extend(_link(messages))
    if not found:
        return []
    total = sum(len(c) for c in found)
    long = [c for c in found if len(c) >= MIN_TURNS]
    if total / len(found) < MIN_TURNS or sum(len(c) for c in long) < MIN_COVERED * total:
        return []
    return long


def _axis(shape: tuple[Any, ...]) -> int:
    """The sequence dimension: the first, or the second behind a batch of one (`[1, T]`)."""
    return 1 if len(shape) >= 2 and shape[0] == 1 else 0


def _rest(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    a = _axis(shape)
    return shape[:a] + shape[a + 1:]


def _link(messages: list[tuple[Leaf, int]]) -> list[list[tuple[Leaf, int]]]:
    open_: list[list[tuple[Leaf, int]]] = []
    for leaf, nbytes in messages:
        a = _axis(leaf.shape)
        size = leaf.shape[a]
        best = None
        for chain in open_:
            last = chain[-1][0]
            first = chain[0][0].shape[a]
            if (len(last.shape) == len(leaf.shape) and _axis(last.shape) == a
                    and _rest(last.shape) == _rest(leaf.shape) and last.dtype == leaf.dtype
                    and size - last.shape[a] >= MIN_GROWTH * first
                    and (best is None or last.shape[a] > best[-1][0].shape[a])):
                best = chain
        if best is None:
            open_.append([(leaf, nbytes)])
        else:
            best.append((leaf, nbytes))
    return open_
