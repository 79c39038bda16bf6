"""Conversations found in a stream of messages from the shapes alone, for `prefix_resend`.

A stream of batches of the same rows whose second dim varies (`[E, L]`, a vectorised
env's episodes side by side) is read along that dim, and only as turns the receiver
answered (one GRPO group `[G, R]` a message rises by chance). Within one step, conversations
that take turns in a fixed order (message i
belongs to conversation i mod K, for the least K under which each grows by at
least half its first length every turn) are read as such; otherwise each
message's leaf continues an open chain it can extend (other dims equal, its
sequence dim longer by at least `MIN_GROWTH` of the chain's first length: a long
system prompt and short turns), or opens a chain: the chain that has waited
longest for its next turn (conversations taking turns), or, where the step's
messages do not read as conversations so, the one it extends least
(conversations in threads, in no order, whose lengths overlap: the fewest chains
that cover the step, since no message can extend a chain of its own
conversation's later turns). Where the receiver answers, half the chains' turns must
hold the answer before them (`_turns_answered`); where it never does, the chains must be
in flight together (`_interleaved`).

Any stream of varied lengths (one message per trajectory) links into rising
chains now and then, more the more messages a step has; read backwards it links
as well. Conversations link only forwards, since their turns come in order: a
step counts only when its messages read backwards cover at most `MAX_BACKWARD`
of what they cover forwards, and the stream only when at least `MIN_STEPS` of
its steps count and the chains look like conversations (see `prefix_resend`);
otherwise none are returned.

A step whose messages only grow is one stream sorted by length (micro-batches, shortest
first), one conversation (a worker's, alone on its seam), or a few in lockstep (turn t of
each before turn t+1 of any, their turns adding more than their prompts differ). The
shapes alone cannot tell them apart; the turns can: a conversation's next message comes
after the receiver's answer and holds it (`_answered`): message i and i+K are turns of
one conversation, for the least K under which every turn was answered.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right
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
# Conversations in lockstep whose every turn was answered: the answers rule most wrong Ks
# out, and growths of a quarter the rest (a wrong K's chains rise by the prompts' spread)
MIN_ANSWERED_GROWTH = 0.25
# Chains read from the step's messages in reverse order, at most this share of those read
# forwards: a growth that comes as often backwards as forwards is chance, not turns.
MAX_BACKWARD = 0.5
MIN_STEPS = 0.5  # of the steps with messages: conversations are the stream's shape, not a fluke
# One conversation alone on its seam: each turn adds the receiver's answer, at least this share
# of what it added (an answer of generated tokens, then the environment's observation)
MIN_ANSWER = 0.1


# (leaf, bytes, step, t_ns) of a message on a seam
Message = tuple["Leaf", int, Any, int]


def chains(stream: list[Message],
           answers: list[tuple[int, Leaf]] | None = None) -> list[list[tuple[Leaf, int]]]:
    """The stream's conversations (each a chain of (leaf, bytes)), or [] when it has none.
    `answers`: (t_ns, array leaf) of the messages the receiver sent back to the sender, in
    time order."""
    by_step: dict[Any, list[tuple[Leaf, int]]] = defaultdict(list)
    times: dict[Any, list[int]] = defaultdict(list)
    batched = bool(answers) and _batched(stream)
    if batched:  # episodes of a vectorised env, `[E, L]`: along L, and only turns answered
        stream = [(_swapped(leaf), nbytes, step, t_ns) for leaf, nbytes, step, t_ns in stream]
        answers = [(t, _swapped(leaf) if _batched_like(leaf, stream) else leaf)
                   for t, leaf in answers or ()]
    for leaf, nbytes, step, t_ns in stream:
        if isinstance(leaf.shape[_axis(leaf.shape)], int):
            by_step[step].append((leaf, nbytes))
            times[step].append(t_ns)
    found: list[list[tuple[Leaf, int]]] = []
    steps = with_turns = 0
    for step, messages in by_step.items():
        if len(messages) < MIN_TURNS:
            continue
        steps += 1
        if batched or _ascending(messages):
            # one stream sorted by length (micro-batches by length), or conversations in
            # lockstep: those, only where each turn follows the receiver's answer and holds it
            # (a batch's rows side by side: one group a message, its lengths by chance)
            lockstep = _answered_rounds(messages, times[step], answers) if answers else None
            if lockstep:
                with_turns += 1
                found.extend(lockstep)
            continue
        rounds, back = _rounds(messages), _rounds(messages[::-1])
        for fit in (False,) if rounds else (False, True):  # linked one way, or else the other
            forward = rounds or _link(messages, fit)
            # Any stream of varied lengths links into rising chains now and then; read
            # backwards it links as well. Conversations do only forwards: turns come in order.
            backward = back or _link(messages[::-1], fit)
            covered = _covered(forward)
            if covered >= MIN_COVERED * len(messages) \
                    and _covered(backward) <= MAX_BACKWARD * covered \
                    and (_turns_answered(messages, times[step], forward, answers) if answers
                         else _interleaved(messages, forward)):
                with_turns += 1
                found.extend(forward)
                break
    if not found or with_turns < MIN_STEPS * steps:
        return []
    total = sum(len(c) for c in found)
    long = [c for c in found if len(c) >= MIN_TURNS]
    if total / len(found) < MIN_TURNS or sum(len(c) for c in long) < MIN_COVERED * total:
        return []
    return long


def _interleaved(messages: list[tuple[Leaf, int]], found: list[list[tuple[Leaf, int]]]) -> bool:
    """Whether the chains are conversations in flight together: at least half of their
    turns come after another chain's message, not straight after their own last. A
    stream nobody answers whose chains run back to back (lengths that climb by a fixed
    step, then fall and climb again) has no turns to wait for: it is one unit a message."""
    at = {id(m): i for i, m in enumerate(messages)}  # `_link` chains the very items
    links = apart = 0
    for chain in found:
        if len(chain) < MIN_TURNS:
            continue
        where = [at[id(m)] for m in chain]
        links += len(where) - 1
        apart += sum(b - a > 1 for a, b in zip(where, where[1:]))
    return links > 0 and 2 * apart >= links


def _turns_answered(messages: list[tuple[Leaf, int]], times: list[int],
                    found: list[list[tuple[Leaf, int]]],
                    answers: list[tuple[int, Leaf]]) -> bool:
    """Whether at least half the chains' turns hold an answer the receiver sent before them:
    an array no longer than what the turn added and at least `MIN_ANSWER` of it, whatever
    its dtype (a turn's log-probs grow by the tokens the worker sent, as its ids do).
    Replies of random lengths to one worker rise now and then by chance, but a rise that
    holds none of the worker's new tokens is no turn. Where no array came back between (a
    request that only asks for the next turn), the answer cannot say: the turn counts."""
    at = {id(m): t for m, t in zip(messages, times)}  # `_link` chains the very items
    when = [t for t, _ in answers]
    links = held = 0
    for chain in found:
        if len(chain) < MIN_TURNS:
            continue
        for first, second in zip(chain, chain[1:]):
            prev, cur = first[0], second[0]
            a = _axis(cur.shape)
            added = cur.shape[a] - prev.shape[a]
            between = answers[bisect_right(when, at[id(first)]):bisect_left(when, at[id(second)])]
            links += 1
            held += not between or any(
                isinstance(n, int) and MIN_ANSWER * added <= n <= added
                for n in (leaf.shape[_axis(leaf.shape)] for _, leaf in between))
    return links > 0 and 2 * held >= links


def _answered_rounds(messages: list[tuple[Leaf, int]], times: list[int],
                    answers: list[tuple[int, Leaf]]) -> list[list[tuple[Leaf, int]]] | None:
    """K conversations in lockstep (message i is conversation i mod K), for the least K
    under which each turn of each follows the receiver's answer to its last, and, for more
    than one, adds a turn, not the prompts' spread (a wrong K fits small growths); None if
    none."""
    for k in range(1, len(messages) // MIN_TURNS + 1):
        split = [messages[j::k] for j in range(k)]
        if all((k == 1 or _grows(c, MIN_ANSWERED_GROWTH)) and _answered(c, times[j::k], answers)
               for j, c in enumerate(split)):
            return split
    return None


def _answered(messages: list[tuple[Leaf, int]], times: list[int],
              answers: list[tuple[int, Leaf]]) -> bool:
    """Whether between each message and the next the receiver answered with an array of the
    message's dtype and rows, no longer than what the next turn added and at least
    `MIN_ANSWER` of it: the next turn is the last one, its answer and more (a conversation),
    not another, longer sequence (micro-batches sorted by length, acknowledged or not). An
    answer as long as the message is an output per token of it (a critic's values)."""
    at = [t for t, _ in answers]  # in time order
    for (prev, _), (cur, _), t0, t1 in zip(messages, messages[1:], times, times[1:]):
        a = _axis(cur.shape)
        added = cur.shape[a] - prev.shape[a]
        rows = _rest(cur.shape)  # an answer of the same rows: (), or (1,) as `[1, T]` or `[T]`
        between = answers[bisect_right(at, t0):bisect_left(at, t1)]
        if not any(leaf.dtype == cur.dtype and leaf.shape
                   and _rest(leaf.shape) in (rows, () if rows == (1,) else rows)
                   and isinstance(leaf.shape[_axis(leaf.shape)], int)
                   and MIN_ANSWER * added <= leaf.shape[_axis(leaf.shape)] <= added
                   and leaf.shape[_axis(leaf.shape)] != prev.shape[_axis(prev.shape)]
                   for _, leaf in between):
            return False
    return True


def _batched(stream: list[Message]) -> bool:
    """Whether every message is a batch of the same rows (more than one) whose second dim
    varies: episodes of a vectorised environment side by side, `[E, L]`, grow along L."""
    firsts = {m[0].shape[0] if len(m[0].shape) >= 2 else None for m in stream}
    if len(firsts) != 1 or None in firsts:
        return False
    rows = next(iter(firsts))
    return isinstance(rows, int) and rows > 1 and \
        len({m[0].shape[1] for m in stream}) > 1


def _batched_like(leaf: Leaf, stream: list[Message]) -> bool:
    """An answer of the stream's rows (one message a row's new tokens, `[E, n]`)."""
    return len(leaf.shape) >= 2 and bool(stream) and leaf.shape[0] == stream[0][0].shape[1]


def _swapped(leaf: Leaf) -> Leaf:
    """`leaf` with its first two dims swapped: read along its second."""
    shape = leaf.shape
    return dataclasses.replace(leaf, shape=(shape[1], shape[0], *shape[2:]))


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


def _link(messages: list[tuple[Leaf, int]], fit: bool) -> list[list[tuple[Leaf, int]]]:
    """Each message continues an open chain it can extend, or opens one: the chain that
    waited longest for its next turn (conversations in turn), or with `fit` the one it
    extends least (conversations in no order, each turn adding alike: the fewest chains
    that cover a sequence, as patience sorting finds them)."""
    open_: list[list[tuple[Leaf, int]]] = []
    for message in messages:  # the very items, so a chain's turns are found in the stream
        leaf = message[0]
        a = _axis(leaf.shape)
        size = leaf.shape[a]
        best = None
        for chain in open_:
            last = chain[-1][0]
            if (len(last.shape) == len(leaf.shape) and _axis(last.shape) == a
                    and _rest(last.shape) == _rest(leaf.shape) and last.dtype == leaf.dtype
                    and size - last.shape[a] >= MIN_GROWTH * chain[0][0].shape[a]
                    and (best is None or last.shape[a] > best[-1][0].shape[a])):
                best = chain
                if not fit:
                    break
        if best is None:
            open_.append([message])
        else:  # the conversation waited longest for its next turn: round-robin order holds
            open_.remove(best)
            best.append(message)
            open_.append(best)
    return open_
