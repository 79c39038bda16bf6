"""Conversations found by content, where the transport serialised the arrays.

`growth` reads conversations from shapes alone, and a stream of new rows whose turns
each add more than the last (an environment's observations growing turn by turn, sent
as deltas: the fix) has the shapes of a resent prefix. Where a message's arrays were
serialised, the tracer wrote the CRC of 16 bytes at fixed offsets of each (`w` lines,
`trace_format.WINDOW_OFFSETS`): a message that resends the previous turn starts with
its bytes, so their windows agree wherever both have one; new rows do not. Each message
continues the open chain whose last message it so extends (longer along one dim, the
others equal, the windows agreeing at two offsets or more: past a template's first
16 bytes), the one that agrees at most offsets, else opens a chain. A leaf whose windows
are all alike (a mask of ones, zeros) says nothing of its content and links nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowmap.read.events import Leaf

MIN_SHARED = 2  # windows two messages must both have, and agree on, to be one conversation

Message = tuple["Leaf", int, Any, int]  # (leaf, its bytes, step, t_ns), as `growth` has them


def chains(stream: list[Message], windows: list[tuple[int, ...]]) -> list[list[tuple[Leaf, int]]]:
    """The conversations of `stream` (messages in time order, `windows` theirs), as chains
    of (leaf, bytes) of two messages or more."""
    open_: list[tuple[list[tuple[Leaf, int]], tuple[int, ...]]] = []
    for (leaf, nbytes, _, _), crcs in zip(stream, windows):
        if len(set(crcs)) < MIN_SHARED:
            continue  # uniform, or too short to tell: no evidence either way
        best, agreed = None, 0
        for k, (chain, last) in enumerate(open_):
            shared = min(len(last), len(crcs))
            if shared >= MIN_SHARED and shared > agreed and last[:shared] == crcs[:shared] \
                    and _extends(chain[-1][0].shape, leaf.shape):
                best, agreed = k, shared
        if best is None:
            open_.append(([(leaf, nbytes)], crcs))
        else:
            chain = open_[best][0]
            chain.append((leaf, nbytes))
            open_[best] = (chain, crcs)
    return [chain for chain, _ in open_ if len(chain) >= 2]


def _extends(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether shape `b` is `a` grown along one dim, the others equal."""
    if len(a) != len(b):
        return False
    grown = [(x, y) for x, y in zip(a, b) if x != y]
    return (len(grown) == 1 and isinstance(grown[0][0], int) and isinstance(grown[0][1], int)
            and grown[0][1] > grown[0][0])
