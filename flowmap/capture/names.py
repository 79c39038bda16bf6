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

import itertools
import json
import sys
from itertools import repeat
from operator import is_
from typing import Any

from flowmap.writer.encoder import items_json

MAX_ITEMS = 4096
# A str as `dumps` writes it (ensure_ascii=False), without the encoder's dispatch.
_json_str = json.encoder.encode_basestring

_NUMBERS = {int: int.__repr__, float: float.__repr__, bool: bool.__repr__}


def name_text(x: Any) -> str | None:
    """`x` as the text of an owner or name, or None when it cannot be taken safely."""
    t = type(x)
    if t is str:
        text: str = x
        return text
    if isinstance(x, str):
        return str.__add__("", x)  # an exact copy, no hook of the subclass runs
    fmt = _NUMBERS.get(t)
    if fmt is not None:
        return fmt(x)
    if isinstance(x, int):
        return int.__repr__(x)
    return None


NOT_READ: Any = object()  # items_list's answer for a type it does not read


def items_list(items: Any) -> Any:
    """The ids of `items` (a list, or None for none), or NOT_READ for a type not read."""
    t = type(items)
    if t is list or t is tuple:
        seq = items
    elif items is None:
        return None
    elif t is str or t is int:
        return [items]
    elif t is set or t is frozenset or t is range:
        seq = items
    elif isinstance(items, list):
        seq = list.copy(items)
    elif isinstance(items, tuple):
        seq = tuple.__getitem__(items, slice(None))
    elif isinstance(items, (set, frozenset)):
        seq = frozenset.copy(items) if isinstance(items, frozenset) else set.copy(items)
    elif isinstance(items, str):
        return [str.__add__("", items)]
    elif isinstance(items, int):
        return [int.__add__(items, 0)]
    else:
        return NOT_READ
    if len(seq) > MAX_ITEMS:
        seq = list(itertools.islice(seq, MAX_ITEMS))
    if t is range:
        return list(seq) or None
    return [x if type(x) is str or type(x) is int else _item_id(x) for x in seq] or None


def _item_id(x: Any) -> Any:
    tx = type(x)
    # uuid is not imported here: a UUID exists only once its module is loaded
    uuid_type: Any = getattr(sys.modules.get("uuid"), "UUID", None)
    if uuid_type is not None and tx is uuid_type:
        return str(x)  # exactly uuid.UUID: the standard library's __str__, no user code
    if tx is bool:
        return int(x)
    text = name_text(x)
    if text is not None:
        return text
    if getattr(tx, "__module__", "") == "numpy" and _is_numpy_integer(x):
        return int(x)
    return f"<{tx.__name__}@{id(x):x}>"


def _is_numpy_integer(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.integer)


def items_text(items: Any) -> str | None:
    """`items` as the JSON of the hop line; None for a type that is not read.

    Most hops carry no ids, one int, or a list of ints or of strings: those are
    written here without building the list `items_list` makes.
    """
    t = type(items)
    if t is list or t is tuple:
        n = len(items)
        if n == 0:
            return "null"
        if n == 1:  # one trajectory, one request: the common hop
            one = items[0]
            if type(one) is int:
                return f"[{int.__repr__(one)}]"
            if type(one) is str:  # a branch, a leaf id
                return f"[{_json_str(one)}]"
        elif n <= MAX_ITEMS and all(map(is_, map(type, items), repeat(int))):  # checked in C
            return f"[{','.join(map(int.__repr__, items))}]"
        if n <= MAX_ITEMS and all(map(is_, map(type, items), repeat(str))):  # string ids
            return f"[{','.join(map(_json_str, items))}]"
    got = items_list(items)
    if got is NOT_READ:
        return None
    return items_json(got)


