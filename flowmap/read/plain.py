"""Plain values read from a shard, made safe: what a hostile or corrupt trace can put in a
header or an event (a huge int, a lone surrogate, a deep list) comes out as a value every
reader and reporter can print and compare, never as an exception."""

from __future__ import annotations

import json
import os
from typing import Any

from flowmap import trace_format as tf


def show_path(path: str) -> str:
    return clean_text(os.fspath(path))


def as_int(v: Any) -> int:
    return v if type(v) is int and -(1 << 63) <= v < (1 << 63) else 0


def as_text(v: Any, default: Any) -> Any:
    return clean_text(v[:4096]) if type(v) is str else default


def clean_text(s: str) -> str:
    """`s` safe to print and to write as UTF-8: a lone surrogate becomes the text `\\udcXX`."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def clean(v: Any, depth: int = 0) -> Any:
    t = type(v)
    if t is str:
        return clean_text(v)
    if t is list and depth < 6:
        return [clean(x, depth + 1) for x in v]
    return v


def count(v: Any, default: int) -> int:
    return v if type(v) is int and 0 <= v <= tf.MAX_INT else default


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


loads_strict = json.JSONDecoder(parse_constant=_no_constant).decode  # no NaN, no Infinity
