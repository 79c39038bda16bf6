"""Percentages as users write them: `--tolerance 10%`, `max_dropped: 5 %`, or a fraction `0.1`.

A bare number of 1 or more is refused rather than guessed: `--tolerance 10`
could mean 10 % or 1000 %, and a CI gate must not guess.
"""

from __future__ import annotations

import re

from flowmap.errors import UsageError

DEFAULT_TOLERANCE = 0.10
_PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(%?)\s*$")


def parse_fraction(text: str | float | int, what: str = "--tolerance") -> float:
    """'10%' -> 0.1, '2.5 %' -> 0.025, 0.1 -> 0.1; raises UsageError with one sentence otherwise."""
    if isinstance(text, bool):
        raise _bad(text, what)
    if isinstance(text, (int, float)):
        value, percent = float(text), False
    else:
        m = _PERCENT.match(str(text))
        if not m:
            raise _bad(text, what)
        value, percent = float(m.group(1)), m.group(2) == "%"
    if percent:
        return value / 100
    if value >= 1:
        raise UsageError(
            f"{what} {text!r} is ambiguous; write a percentage like '{value:g}%' or a fraction below 1"
        )
    return value


def _bad(text: object, what: str) -> UsageError:
    return UsageError(f"cannot read {what} {text!r}; write a percentage like '10%' (or a fraction like 0.1)")


def fmt_percent(fraction: float) -> str:
    """0.1 -> '10 %', 0.025 -> '2.5 %' (size-limit style: a space before %)."""
    p = fraction * 100
    return f"{p:.0f} %" if abs(p) >= 10 or p == int(p) else f"{p:.1f} %"


def fmt_change(before: float, after: float) -> str:
    """Signed relative change: '+100 %', '-33 %', '+2.5 %'; 'new' when there was nothing before."""
    if before == 0:
        return "+0 %" if after == 0 else "new"
    p = (after - before) / before * 100
    if p == 0:
        return "+0 %"
    return f"{p:+.0f} %" if abs(p) >= 10 else f"{p:+.1f} %"
