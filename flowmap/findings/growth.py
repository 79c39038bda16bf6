"""Conversations found in a stream of messages from the shapes alone, for `prefix_resend`.

Within one step, conversations that take turns in a fixed order (message i
belongs to conversation i mod K, for the least K under which each grows turn by
turn) are read as such; otherwise each message's leaf continues the open chain
that has waited longest for its next turn among those it can extend (other dims
equal, its sequence dim longer by at least half the chain's first length), or
opens a chain. The stream counts as
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
        if _ascending(messages):
            continue  # one stream sorted by length (or one conversation): not several in turn
        found.extend(_rounds(messages) or _link(messages))
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


def _ascending(messages: list[tuple[Leaf, int]]) -> bool:
    sizes = [leaf.shape[_axis(leaf.shape)] for leaf, _ in messages]
    return all(b > a for a, b in zip(sizes, sizes[1:]))


def _rounds(messages: list[tuple[Leaf, int]]) -> list[list[tuple[Leaf, int]]] | None:
    """K conversations taking turns in a fixed order (message i is conversation i mod K), for
    the least K under which every conversation grows turn by turn; None when no K fits."""
    for k in range(1, len(messages) // MIN_TURNS + 1):
        split = [messages[j::k] for j in range(k)]
        if all(_grows(c) for c in split):
            return split
    return None


def _grows(chain: list[tuple[Leaf, int]]) -> bool:
    first = chain[0][0]
    a = _axis(first.shape)
    for (prev, _), (cur, _) in zip(chain, chain[1:]):
        if (len(cur.shape) != len(first.shape) or _axis(cur.shape) != a
                or _rest(cur.shape) != _rest(first.shape) or cur.dtype != first.dtype
                or cur.shape[a] - prev.shape[a] < MIN_GROWTH * first.shape[a]):
            return False
    return True


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
                    and size - last.shape[a] >= MIN_GROWTH * first):
                best = chain
                break
        if best is None:
            open_.append([(leaf, nbytes)])
        else:  # the conversation waited longest for its next turn: round-robin order holds
            open_.remove(best)
            best.append((leaf, nbytes))
            open_.append(best)
    return open_
