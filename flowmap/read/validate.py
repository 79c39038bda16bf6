"""Check decoded events against the table in `flowmap.trace_format`.

A reader trusts nothing in a shard: every field of every event is checked
for its type and bounds before a record is built from it, so a corrupt or
hostile file can only produce skipped, counted lines — never an exception,
an unbounded computation (a 1 MB string multiplied as a time) or a crash
downstream (NaN in a sum, a 400-digit number, an id that was never interned).

For speed, each kind's check is generated once from the table as one Python
expression (a call per event instead of a call per field): reading a million
hops stays within the scale targets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowmap import trace_format as tf

Check = Callable[[list[Any], dict[int, str], dict[int, Any]], bool]

_INT = "(type({v}) is int and {lo} <= {v} <= {hi})"
_EXPR: dict[str, str] = {
    tf.ID: _INT.replace("{lo}", "0").replace("{hi}", str(tf.MAX_ID)),
    tf.TIME: _INT.replace("{lo}", str(-tf.MAX_TIME_US)).replace("{hi}", str(tf.MAX_TIME_US)),
    tf.STR_REF: "(type({v}) is int and {v} in S)",
    tf.SCHEMA_REF: "(type({v}) is int and {v} in SC)",
    tf.COUNT: _INT.replace("{lo}", "0").replace("{hi}", str(tf.MAX_INT)),
    tf.OPT_INT: "({v} is None or " + _INT.replace("{lo}", str(-tf.MAX_INT)).replace(
        "{hi}", str(tf.MAX_INT)) + ")",
    tf.NUMBER: "(number({v}))",
    tf.TEXT: f"(type({{v}}) is str and len({{v}}) <= {tf.MAX_TEXT})",
    tf.ITEMS: "({v} is None or ({v}.__class__ is list and len({v}) == 1 and "
              "{v}[0].__class__ is int and -MAX_INT <= {v}[0] <= MAX_INT) or items({v}))",
    tf.INTS: "({v} == [] or ({v}.__class__ is list and len({v}) == 1 and "
             "{v}[0].__class__ is int and 0 <= {v}[0] <= MAX_INT) or ints({v}))",
    tf.LEAVES: "(leaves({v}, S))",
    tf.STATS: "(type({v}) is dict)",
    tf.NOTES: "(notes({v}))",
    tf.FIGURES: "(figures({v}))",
    tf.WINDOW_LIST: "(windows({v}))",
}


def number(v: Any) -> bool:
    t = type(v)
    if t is int:
        n: int = v
        return -tf.MAX_INT <= n <= tf.MAX_INT
    return t is float and -tf.MAX_NUMBER <= v <= tf.MAX_NUMBER  # False for NaN


def items(v: Any) -> bool:
    if type(v) is not list or len(v) > tf.MAX_ITEMS:
        return False
    for x in v:
        t = type(x)
        if t is int:
            if not -tf.MAX_INT <= x <= tf.MAX_INT:
                return False
        elif t is not str or len(x) > tf.MAX_TEXT:
            return False
    return True


def ints(v: Any) -> bool:
    if type(v) is not list or len(v) > tf.MAX_ITEMS:
        return False
    for x in v:
        if type(x) is not int or not 0 <= x <= tf.MAX_INT:
            return False
    return True


def _count(x: object) -> bool:
    return type(x) is int and 0 <= x <= tf.MAX_INT


def _rows(v: object, row: Callable[[object], bool]) -> bool:
    """A list of at most `MAX_LEAVES` rows, each one that `row` accepts."""
    return type(v) is list and len(v) <= tf.MAX_LEAVES and all(map(row, v))


def _note(n: object) -> bool:
    return (type(n) is list and len(n) in (4, 5) and type(n[0]) is str and len(n[0]) <= tf.MAX_TEXT
            and _count(n[1]) and all(x is None or _count(x) for x in n[2:]))


def notes(v: Any) -> bool:
    """`[[path, nbytes, storage_bytes or null, real or null(, numbers or null)], ...]` (an `n`
    event; traces before `numbers` have four)."""
    return _rows(v, _note)


def _window(w: object) -> bool:
    return (type(w) is list and len(w) == 2 and type(w[0]) is str and len(w[0]) <= tf.MAX_TEXT
            and type(w[1]) is list and len(w[1]) <= len(tf.WINDOW_OFFSETS)
            and all(type(c) is int and 0 <= c < 1 << 32 for c in w[1]))


def windows(v: Any) -> bool:
    """`[[path, [crc, ...]], ...]` (a `w` event)."""
    return _rows(v, _window)


def _figure(f: object) -> bool:
    return (type(f) is list and len(f) in (6, 7) and type(f[0]) is str
            and len(f[0]) <= tf.MAX_TEXT and number(f[1]) and number(f[2])
            and (f[3] is None or number(f[3])) and (f[4] is None or _count(f[4]))
            and _count(f[5]) and (len(f) == 6 or f[6] is None or _count(f[6])))


def figures(v: Any) -> bool:
    """`[[path, min, max, sum or null, zero_tail or null, elements, filled or null], ...]`
    (a `v` event; traces before `filled` have six)."""
    return _rows(v, _figure)


def _dim(d: Any) -> bool:
    if type(d) is int:
        return 0 <= d <= tf.MAX_INT
    return (type(d) is list and len(d) == 2 and type(d[0]) is int and type(d[1]) is int
            and 0 <= d[0] <= tf.MAX_INT and 0 <= d[1] <= tf.MAX_INT)


def leaves(v: Any, strings: dict[int, str]) -> bool:
    if type(v) is not list or len(v) > tf.MAX_LEAVES:
        return False
    for leaf in v:
        if type(leaf) is not list or len(leaf) != 8:
            return False
        p, k, shape, dt, dev, nb, cnt, dims = leaf
        if not (type(p) is int and p in strings and type(k) is str and len(k) <= 64
                and type(dt) is int and dt in strings and type(dev) is int and dev in strings
                and type(nb) is int and 0 <= nb <= tf.MAX_INT
                and type(cnt) is int and 0 <= cnt <= tf.MAX_INT
                and type(shape) is list and len(shape) <= 64 and all(map(_dim, shape))):
            return False
        if dims is not None and not (
            type(dims) is list and len(dims) <= 64
            and all(type(d) is str and len(d) <= tf.MAX_TEXT for d in dims)
        ):
            return False
    return True


def _compile(kind: str, fields: tuple[tuple[str, str], ...]) -> Check:
    optional = tf.OPTIONAL.get(kind, len(fields) + 1)
    need = min(optional, len(fields) + 1)
    parts = [f"type(ev) is list and len(ev) >= {need}"]
    for i, (_, ftype) in enumerate(fields, start=1):
        expr = _EXPR[ftype].replace("{v}", f"ev[{i}]")
        parts.append(expr if i < optional else f"(len(ev) <= {i} or {expr})")
    source = "lambda ev, S, SC: " + " and ".join(parts)
    env = {"number": number, "items": items, "ints": ints, "leaves": leaves, "notes": notes,
           "figures": figures, "windows": windows,
           "MAX_INT": tf.MAX_INT}
    check: Check = eval(compile(source, f"<check {kind}>", "eval"), env)  # noqa: S307 - our table
    return check


CHECKS: dict[str, Check] = {kind: _compile(kind, f) for kind, f in tf.EVENTS.items()}
