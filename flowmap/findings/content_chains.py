"""Conversations found by content, where the transport serialised the arrays.

`growth` reads conversations from shapes alone, which must guess which message continues
which (conversations interleaved, in threads, alone on a seam with no answer to tell
turns by). Where a message's arrays were serialised, the tracer wrote the CRC of 16
bytes at fixed offsets of each (`w` lines, `trace_format.WINDOW_OFFSETS`): a message that
resends the previous turn starts with its bytes, so their windows agree wherever both
have one. Those conversations are certain, and `prefix_resend` takes them where there
are any; where content links none (arrays computed anew every turn), the shapes decide
as before.

Each message continues the open chain whose last message it so extends (longer along
one dim, the others equal, the windows agreeing at two offsets or more: past a
template's first 16 bytes), else opens a chain. Where it extends several (conversations
whose content is alike as far as it was read: a long system prompt, the same ids in
each), content cannot tell them apart, and none is returned. A leaf whose windows are
all alike (a mask of ones, zeros) says nothing of its content and links nothing.
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
        fits = [k for k, (chain, last) in enumerate(open_)
                if min(len(last), len(crcs)) >= MIN_SHARED
                and last[:len(crcs)] == crcs[:len(last)] and _extends(chain[-1][0].shape, leaf.shape)]
        if len(fits) > 1:
            return []  # conversations alike where both have bytes (a long system prompt, the
            # same ids in each): content cannot tell them apart, the shapes will
        best = fits[0] if fits else None
        if best is None:
            open_.append(([(leaf, nbytes)], crcs))
        else:
            chain = open_.pop(best)[0]
            chain.append((leaf, nbytes))
            open_.append((chain, crcs))  # its turn taken: it waits again
    return [chain for chain, _ in open_ if len(chain) >= 2]


def _extends(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether shape `b` is `a` grown along one dim, the others equal."""
    if len(a) != len(b):
        return False
    grown = [(x, y) for x, y in zip(a, b) if x != y]
    return (len(grown) == 1 and isinstance(grown[0][0], int) and isinstance(grown[0][1], int)
            and grown[0][1] > grown[0][0])
