"""Numbers sent as text: how many, read from bytes a transport already serialised.

A payload of one string (`json.dumps(logprobs)` sent with `send_string`, put on a
queue, sent down a pipe) has its length as its own bytes, the very bytes that cross,
so the encoding looks free (`flowmap.findings.serialisation`). Its cost is what the
text holds: a float32 written as JSON takes 10 to 20 bytes, 4 in the array the fix
sends. Telling number text from prose would mean reading the string; the frame the
transport wrote from it is in hand, so three 64-byte windows of that frame are read
(a quarter, half and three quarters in, where a long array's numbers lie). Where each
holds nothing but number text (digits, signs, points, exponents, separators, brackets,
at least 40 % digits), the numbers in the message are estimated from the windows'
density. Prose, identifiers, base64 and binary fail in the first window. The figure
goes on a leaf note of the text leaf (`n` event, its fifth field); nothing is kept.
Cost: about 4 µs per text message of at least `MIN_BYTES` (docs/performance.md).
"""

from __future__ import annotations

import re
from typing import Any

from flowmap.integrations.transports.relay_bytes import byte_view

MIN_BYTES = 1024  # below this a message is its framing, as `serialisation` reads it
WINDOW = 64
_DIGITS = b"0123456789"
# what else a run of numbers written as text holds: signs, points, exponents, separators
_NUMBER_TEXT = _DIGITS + b".,-+eE[]() \t\n\r;:"
# a number's start: a sign, a point or a digit after a separator (a window may open
# mid-number: that one is not counted, so a number cut at a window's edge counts once)
_START = re.compile(rb"[^0-9.eE+\-][-+]?\.?[0-9]")
MIN_DIGITS = 0.4  # of a window: "[], [], []" is no numbers


def numbers_in(buf: Any) -> int | None:
    """The numbers a serialised text message holds, estimated; None where it is no number
    text (or small, or not contiguous bytes)."""
    try:
        m = byte_view(buf)
        n = m.nbytes
        if n < MIN_BYTES:
            return None
        starts = 0
        for quarter in (2, 1, 3):
            window = bytes(m[n * quarter // 4: n * quarter // 4 + WINDOW])
            if window.translate(None, _NUMBER_TEXT):
                return None  # a byte no number text holds
            if len(window) - len(window.translate(None, _DIGITS)) < MIN_DIGITS * len(window):
                return None
            starts += len(_START.findall(window))
    except (TypeError, ValueError):
        return None
    return max(1, n * starts // (3 * WINDOW)) if starts else None


def note(leaves: Any, buf: Any, wire: int) -> list[Any] | None:
    """The leaf note (`[path, bytes, None, None, numbers]`) of a message whose text leaf,
    most of its `wire` bytes, was serialised as `buf` holding number text; else None."""
    if wire < MIN_BYTES:
        return None
    best: tuple[str, int] | None = None
    for leaf in leaves:
        if leaf[1] in ("str", "bytes") and (best is None or leaf[5] > best[1]):
            best = (leaf[0], leaf[5])
    if best is None or 2 * best[1] < wire:
        return None
    numbers = numbers_in(buf)
    return None if numbers is None else [best[0], best[1], None, None, numbers]
