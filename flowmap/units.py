"""Byte sizes in human units, both ways: "5.0 MiB" out, "2 MB" / "512 KiB" in."""

from __future__ import annotations

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
    """Binary units, three significant figures: 5242880 -> '5.00 MiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{int(n)} B"
            return f"{n:.3g} {unit}" if abs(n) >= 100 else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} PiB"


def parse_bytes(text: str | int | float) -> int:
    """'2 MB' -> 2000000, '512 KiB' -> 524288, 1024 -> 1024; raises UsageError otherwise."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(text)
    m = _SIZE.match(str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise UsageError(f"cannot read {text!r} as a size; write it like '64 KB', '2 MiB' or 1024")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
