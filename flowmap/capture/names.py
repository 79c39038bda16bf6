"""Owners, names and item ids as the trace stores them, taken without user code.

Capture must not run the program's own hooks (`__str__`, `__format__`,
`__iter__`, `__len__`...): they can block, raise, or change state. So a value
is read through its built-in type only:

- owners and names: a `str` (a subclass is copied by `str`'s own code), or an
  `int`/`float`/`bool`, written as its number; anything else is refused;
- items: a `list`, `tuple`, `set`, `frozenset` or `range` (subclasses read
  through the built-in type), cut to `MAX_ITEMS`; any other iterable,
  generators included, is never iterated. Each id is kept if it is a string or
  an int, a `uuid.UUID` or numpy integer becomes its text or number, and any
  other object becomes `<Type@address>`, which is unique while it lives.
"""

from __future__ import annotations

import uuid
from typing import Any

MAX_ITEMS = 4096

_NUMBERS = {int: int.__repr__, float: float.__repr__, bool: bool.__repr__}


def name_text(x: Any) -> str | None:
    """`x` as the text of an owner or name, or None when it cannot be taken safely."""
    t = type(x)
    if t is str:
        return x
    if isinstance(x, str):
        return str.__add__("", x)  # an exact copy, no hook of the subclass runs
    fmt = _NUMBERS.get(t)
    if fmt is not None:
        return fmt(x)
    if isinstance(x, int):
        return int.__repr__(x)
    return None


def items_list(items: Any) -> tuple[list[Any] | None, bool]:
    """(ids, taken): the ids of `items`, or (None, False) for a type that is not read."""
    t = type(items)
    if t is list or t is tuple:
        seq = items
    elif items is None:
        return None, True
    elif t is str or t is int:
        return [items], True
    elif t is set or t is frozenset or t is range:
        seq = items
    elif isinstance(items, list):
        seq = list.copy(items)
    elif isinstance(items, tuple):
        seq = tuple.__getitem__(items, slice(None))
    elif isinstance(items, (set, frozenset)):
        seq = frozenset.copy(items) if isinstance(items, frozenset) else set.copy(items)
    elif isinstance(items, str):
        return [str.__add__("", items)], True
    elif isinstance(items, int):
        return [int.__add__(items, 0)], True
    else:
        return None, False
    if t is range:
        if len(seq) > MAX_ITEMS:
            seq = seq[:MAX_ITEMS]
        return list(seq) or None, True
    out: list[Any] = []
    for x in seq:
        tx = type(x)
        out.append(x if tx is str or tx is int else _item_id(x))
        if len(out) >= MAX_ITEMS:
            break
    return out or None, True


def _item_id(x: Any) -> Any:
    tx = type(x)
    if tx is uuid.UUID:
        return uuid.UUID.__str__(x)
    if tx is bool:
        return int(x)
    text = name_text(x)
    if text is not None:
        return text
    if getattr(tx, "__module__", "") == "numpy" and _is_numpy_integer(x):
        return int(x)
    return f"<{tx.__name__}@{id(x):x}>"


def _is_numpy_integer(x: Any) -> bool:
    import sys

    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.integer)
