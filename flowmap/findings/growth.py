"""Conversations found in a stream of messages from the shapes alone, for `prefix_resend`.

Within one step, conversations that take turns in a fixed order (message i
belongs to conversation i mod K, for the least K under which each grows by at
least half its first length every turn) are read as such; otherwise each
message's leaf continues the open chain that has waited longest for its next
turn among those it can extend (other dims equal, its sequence dim longer by at
least `MIN_GROWTH` of the chain's first length: a long system prompt and short
turns), or opens a chain.

Any stream of varied lengths (one message per trajectory) links into rising
chains now and then, more the more messages a step has; read backwards it links
as well. Conversations link only forwards, since their turns come in order: a
step counts only when its messages read backwards cover at most `MAX_BACKWARD`
of what they cover forwards, and the stream only when at least `MIN_STEPS` of
its steps count and the chains look like conversations (see `prefix_resend`);
otherwise none are returned.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowmap.read.events import Leaf

MIN_TURNS = 3  # mean messages per chain
MIN_COVERED = 0.75  # of the stream's messages in chains of MIN_TURNS or more
MIN_GROWTH = 0.05  # of the chain's first length, per growth (a turn, not a token's jitter)
# In a fixed order of turns the least K that fits wins, and small growths let a wrong K fit
# (every other message of three conversations rising by chance): rounds need whole turns.
MIN_ROUND_GROWTH = 0.5
# Chains read from the step's messages in reverse order, at most this share of those read
# forwards: a growth that comes as often backwards as forwards is chance, not turns.
MAX_BACKWARD = 0.5
MIN_STEPS = 0.5  # of the steps with messages: conversations are the stream's shape, not a fluke


def chains(stream: list[tuple[Leaf, int, Any]]) -> list[list[tuple[Leaf, int]]]:
    """The stream's conversations (each a chain of (leaf, bytes)), or [] when it has none."""
    by_step: dict[Any, list[tuple[Leaf, int]]] = defaultdict(list)
    for leaf, nbytes, step in stream:
        if isinstance(leaf.shape[_axis(leaf.shape)], int):
            by_step[step].append((leaf, nbytes))
    found: list[list[tuple[Leaf, int]]] = []
    steps = with_turns = 0
    for messages in by_step.values():
        if len(messages) < MIN_TURNS:
            continue
        steps += 1
        if _ascending(messages):
            continue  # one stream sorted by length (or one conversation): not several in turn
        forward = _rounds(messages) or _link(messages)
        # Any stream of varied lengths links into rising chains now and then; read backwards
        # it links as well. Conversations do only forwards: their turns come in order.
        backward = _rounds(messages[::-1]) or _link(messages[::-1])
        covered = _covered(forward)
        if covered < MIN_COVERED * len(messages) or _covered(backward) > MAX_BACKWARD * covered:
            continue
        with_turns += 1
        found.extend(forward)
    if not found or with_turns < MIN_STEPS * steps:
        return []
    total = sum(len(c) for c in found)
    long = [c for c in found if len(c) >= MIN_TURNS]
    if total / len(found) < MIN_TURNS or sum(len(c) for c in long) < MIN_COVERED * total:
        return []
    return long


def _covered(found: list[list[tuple[Leaf, int]]]) -> int:
    """Messages in chains of `MIN_TURNS` or more."""
    return sum(len(c) for c in found if len(c) >= MIN_TURNS)


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
        if all(_grows(c, MIN_ROUND_GROWTH) for c in split):
            return split
    return None


def _grows(chain: list[tuple[Leaf, int]], min_growth: float) -> bool:
    first = chain[0][0]
    a = _axis(first.shape)
    for (prev, _), (cur, _) in zip(chain, chain[1:]):
        if (len(cur.shape) != len(first.shape) or _axis(cur.shape) != a
                or _rest(cur.shape) != _rest(first.shape) or cur.dtype != first.dtype
                or cur.shape[a] - prev.shape[a] < min_growth * first.shape[a]):
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
