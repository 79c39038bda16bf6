"""Python's own values: scalars, strings, dicts, sequences, and objects walked by field.

Subclasses are read through the base type's C methods (`dict.items(d)`,
`list.__len__(x)`), so an override of `items`, `__len__`, `__iter__` or
`__getitem__` never runs. Only real dicts (and `MappingProxyType` and
`UserDict` over one) are walked as mappings: any other Mapping may load its
values lazily, so it is opaque.

Lists, sets and long tuples are folded into one `[*]` path per field (`fold.py`).
"""

from __future__ import annotations

import functools
import gc
import itertools
import types
from collections import UserDict
from collections.abc import Callable
from typing import Any

from flowmap.capture.describers import introspect
from flowmap.capture.describers.columns import (
    MAX_FIELDS,
    MAX_INDEXED_TUPLE,
    MAX_LIST_SCAN,
    NUMBER_TYPES,
    mark_record,
    record,
    scalar_of,
)
from flowmap.capture.describers.list_sample import sample_list
from flowmap.capture.describers.walk import (
    FAST,
    HARD_NODES,
    MAX_KEY_CHARS,
    PLANS,
    Walk,
    enter,
    join,
    register,
    register_fallback,
    utf8_len,
    visit,
)


# -- leaves ----------------------------------------------------------------------
def _scalar(kind: str, size: int) -> Callable[[Walk, Any, str, int], None]:
    def handler(w: Walk, obj: Any, path: str, depth: int) -> None:
        w.leaf(path, kind, (), "", size)
    return handler


def _none(w: Walk, obj: Any, path: str, depth: int) -> None:
    w.add((path, "none", (), "", "", 0, 1, None))


def _str(w: Walk, s: str, path: str, depth: int) -> None:
    w.leaf(path, "str", (str.__len__(s),), "", utf8_len(s))


def _bytes(w: Walk, b: Any, path: str, depth: int) -> None:
    t = type(b)
    n = (bytes.__len__(b) if introspect.has_base(t, bytes) else bytearray.__len__(b)
         if introspect.has_base(t, bytearray) else _MV_NBYTES.__get__(b, memoryview))
    w.leaf(path, "bytes", (n,), "", n)


_MV_NBYTES = memoryview.__dict__["nbytes"]


# -- mappings ----------------------------------------------------------------------
def walk_dict(w: Walk, d: dict[Any, Any], path: str, depth: int) -> None:
    """The entries of a real dict (or dict subclass, through dict's own iteration)."""
    tensor_dict = FAST[0]
    if tensor_dict is not None:  # torch is loaded: its loop takes tensors without dispatch
        tensor_dict(w, d, path, depth)
        return
    prefix = f"{path}." if path else ""
    for k, v in dict.items(d):
        if w.full:  # MAX_LEAVES, or HARD_NODES (visit sets `full` there)
            break
        p = f"{prefix}{k}" if type(k) is str and len(k) <= MAX_KEY_CHARS else join(path, k)
        visit(w, v, p, depth + 1)


def _dict(w: Walk, d: dict[Any, Any], path: str, depth: int) -> None:
    if enter(w, d, path, depth):
        walk_dict(w, d, path, depth)


def _mappingproxy(w: Walk, m: Any, path: str, depth: int) -> None:
    # The wrapped mapping, found without calling it; walked only if it is a dict.
    (inner,) = gc.get_referents(m)
    if introspect.has_base(type(inner), dict) and enter(w, m, path, depth):
        walk_dict(w, inner, path, depth)
    else:
        w.opaque(path, type(m))


def _userdict(w: Walk, obj: Any, path: str, depth: int) -> None:
    d = introspect.instance_dict(obj)
    data = d.get("data") if d is not None else None
    if data is not None and introspect.has_base(type(data), dict) and enter(w, obj, path, depth):
        walk_dict(w, data, path, depth)
    else:
        w.opaque(path, type(obj))


def _partial(w: Walk, obj: functools.partial[Any], path: str, depth: int) -> None:
    # A task bound to its data (`pool.map(partial(score, batch), ranks)`): what travels is
    # the arguments, read from the C slots of the exact type, the function not at all.
    if enter(w, obj, path, depth):
        visit(w, obj.args, join(path, "args"), depth + 1)
        visit(w, obj.keywords, join(path, "keywords"), depth + 1)


# -- sequences -------------------------------------------------------------------
def _list(w: Walk, seq: list[Any], path: str, depth: int) -> None:
    if not enter(w, seq, path, depth):
        return
    if type(seq) is list:  # its own C methods: no frame per element read
        sample_list(w, len(seq), seq.__getitem__, path, depth, items=seq)
    else:  # a subclass: read through list's methods, never iterated
        sample_list(w, list.__len__(seq), lambda i: list.__getitem__(seq, i), path, depth)


def _tuple(w: Walk, tup: tuple[Any, ...], path: str, depth: int) -> None:
    if not enter(w, tup, path, depth):
        return
    n = tuple.__len__(tup)
    if n > MAX_INDEXED_TUPLE:
        if type(tup) is tuple:
            sample_list(w, n, tup.__getitem__, path, depth, items=tup)
        else:
            sample_list(w, n, lambda i: tuple.__getitem__(tup, i), path, depth)
        return
    paths = _INDEXED.get(path) or _indexed(path)
    scalars, plans = _SCALARS, PLANS
    # `visit`, inlined for the types met before (a result tuple's are, every call after
    # the first), and a number's handler too: a step's reward and flags are the commonest
    # elements, and their leaf is the same every call
    for i in range(n):
        if w.full:
            return
        v = tuple.__getitem__(tup, i)
        t = type(v)
        facts = scalars.get(id(t))  # by id: a metaclass's `__hash__` is the program's code
        if facts is not None and facts[0] is t:
            w.nodes += 1
            if w.nodes >= HARD_NODES:
                w.full = True
                return
            w.plain += facts[2]
            w.add((paths[i], facts[1], (), "", "", facts[2], 1, None))
            continue
        entry = plans.get(id(t))
        if entry is None or entry[0] is not t:
            visit(w, v, paths[i], depth + 1)  # a type met the first time: resolved there
            continue
        w.nodes += 1
        if w.nodes >= HARD_NODES:
            w.full = True
            return
        try:
            entry[1](w, v, paths[i], depth + 1)
        except Exception:
            w.opaque(paths[i], t)


# path -> its elements' paths (`path[0]`...): a seam that returns a tuple each call names its
# leaves with the same strings, not new ones (which its schema then compares char by char).
_INDEXED: dict[str, tuple[str, ...]] = {}
MAX_INDEXED_PATHS = 4096


def _indexed(path: str) -> tuple[str, ...]:
    if len(_INDEXED) >= MAX_INDEXED_PATHS:  # paths made on the fly (dict keys): bounded
        _INDEXED.clear()
    got = _INDEXED[path] = tuple(f"{path}[{i}]" for i in range(MAX_INDEXED_TUPLE))
    return got


def _set(w: Walk, s: Any, path: str, depth: int) -> None:
    if not enter(w, s, path, depth):
        return
    base = set if introspect.has_base(type(s), set) else frozenset
    n = base.__len__(s)
    head = list(itertools.islice(base.__iter__(s), min(n, MAX_LIST_SCAN)))
    sample_list(w, n, head.__getitem__, path, depth, sample_from=len(head))


# -- objects -----------------------------------------------------------------------
def _fields_handler(getter: Any, slots: list[tuple[str, Any]]) -> Callable[..., None] | None:
    if getter is None and not slots:
        return None
    plan = (getter, slots)

    def handler(w: Walk, obj: Any, path: str, depth: int) -> None:
        if record(w, obj, path, depth, plan) or not enter(w, obj, path, depth):
            return
        t = type(obj)
        fields: list[tuple[str, Any]] = []
        if getter is not None:
            d = getter.__get__(obj, t)
            if type(d) is dict:
                fields = [kv for kv in itertools.islice(dict.items(d), MAX_FIELDS)
                          if type(kv[0]) is str]
        for name, descr in slots:
            try:
                fields.append((name, descr.__get__(obj, t)))
            except AttributeError:  # an unset slot
                pass
        if not fields:
            w.opaque(path, t)
            return
        public = [kv for kv in fields if not kv[0].startswith("_")]
        for k, v in public or fields:
            if w.full:
                return
            visit(w, v, join(path, k), depth + 1)
    mark_record(handler, plan)  # a list of such records can be read by column
    return handler


def _namedtuple_handler(names: tuple[str, ...]) -> Callable[..., None]:
    def handler(w: Walk, tup: tuple[Any, ...], path: str, depth: int) -> None:
        if enter(w, tup, path, depth):
            for i, name in enumerate(names[: tuple.__len__(tup)]):
                if w.full:
                    return
                visit(w, tuple.__getitem__(tup, i), join(path, name), depth + 1)
    return handler


def resolve(t: type, mro: tuple[type, ...]) -> Callable[..., None] | None:
    """The handler for a type no library describer claimed: by its builtin base, else its fields."""
    for base in mro:
        if base is bool:
            return _scalar("bool", 1)
        if base is int or base is float or base is complex:
            return _scalar(*scalar_of(base))  # type: ignore[misc]
        if base is str:
            return _str
        if base is bytes or base is bytearray:
            return _bytes
        if base is dict:
            return _dict
        if base is UserDict:
            return _userdict
        if base is list:
            return _list
        if base is tuple:
            names = introspect.class_attr(t, "_fields")
            if type(names) is tuple and all(type(n) is str for n in names):
                return _namedtuple_handler(names)
            return _tuple
        if base is set or base is frozenset:
            return _set
    if not introspect.is_heap_type(t):
        return None  # modules, functions, classes, C objects: opaque
    return _fields_handler(introspect.dict_getter(t), introspect.slot_getters(t))


# id of an exact number type -> (it, leaf kind, bytes): what `_scalar` records, for `_tuple`
_SCALARS: dict[int, tuple[type, str, int]] = {}
for _t, _kind, _size in NUMBER_TYPES:
    register(_t, _scalar(_kind, _size))
    _SCALARS[id(_t)] = (_t, _kind, _size)
register(type(None), _none)
register(str, _str)
for _t in (bytes, bytearray, memoryview):
    register(_t, _bytes)
register(dict, _dict)
register(types.MappingProxyType, _mappingproxy)
register(list, _list)
register(tuple, _tuple)
register(set, _set)
register(frozenset, _set)
register(functools.partial, _partial)
register_fallback(resolve)
