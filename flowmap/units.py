"""Byte sizes in human units, both ways: "5.0 MiB" out, "2 MB" / "512 KiB" in."""

from __future__ import annotations

import math
import re

from flowmap.errors import UsageError

_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def fmt_bytes(n: float) -> str:
    """Binary units, three significant figures: 5242880 -> '5.00 MiB', 1023.7 KiB -> '1.00 MiB'.

    A figure that would round to 1024 of a unit moves to the next one, so no
    size reads `1e+03 KiB`; a missing figure (NaN, infinity) reads `n/a`.
    """
    n = float(n)
    if not math.isfinite(n):
        return "n/a"
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    for i, unit in enumerate(units):
        last = i == len(units) - 1
        if unit == "B":
            if abs(round(n)) < 1024 or last:
                return f"{round(n)} B"
        else:
            text = f"{n:.0f}" if abs(round(n, 2)) >= 100 else f"{n:.2f}"
            if abs(float(text)) < 1024 or last:
                return f"{text} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def fmt_count(x: float) -> str:
    """A counter value, never in e-notation: `48`, `0.8190`, `-0.04704`, `12,345.6`."""
    x = float(x)
    if not math.isfinite(x):
        return "n/a"
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    mag = math.floor(math.log10(abs(x)))
    decimals = min(6, max(1, 3 - mag))
    return f"{x:,.{decimals}f}"


def plural(n: int, word: str) -> str:
    """`1 hop`, `2 hops`."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def parse_bytes(text: str | int | float) -> int:
    """'2 MB' -> 2000000, '512 KiB' -> 524288, 1024 -> 1024; raises UsageError otherwise."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(text)
    m = _SIZE.match(str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise UsageError(f"cannot read {text!r} as a size; write it like '64 KB', '2 MiB' or 1024")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
