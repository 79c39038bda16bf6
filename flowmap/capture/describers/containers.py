"""Python's own values: scalars, strings, dicts, sequences, and objects walked by field.

Subclasses are read through the base type's C methods (`dict.items(d)`,
`list.__len__(x)`), so an override of `items`, `__len__`, `__iter__` or
`__getitem__` never runs. Only real dicts (and `MappingProxyType` and
`UserDict` over one) are walked as mappings: any other Mapping may load its
values lazily, so it is opaque.

Lists, sets and long tuples are folded into one `[*]` path per field. At most
`MAX_LIST_SCAN` elements are walked, fewer when the payload's node budget runs
low; the rest are extrapolated from that evenly spaced sample.
"""

from __future__ import annotations

import gc
import itertools
import types
from collections import UserDict
from collections.abc import Callable
from typing import Any

from flowmap.capture.describers import introspect
from flowmap.capture.describers.walk import (
    FAST,
    HARD_NODES,
    MAX_KEY_CHARS,
    MAX_LEAVES,
    SOFT_NODES,
    Leaf,
    Walk,
    enter,
    join,
    register,
    register_fallback,
    space_total,
    visit,
)

MAX_LIST_SCAN = 2048
MAX_INDEXED_TUPLE = 16  # longer tuples are folded like lists
MAX_FIELDS = 512
# A string longer than this is sized from its head's UTF-8 length.
MAX_STR_SCAN = 4096

_SCALARS: list[tuple[type, str, int]] = [(int, "int", 8), (float, "float", 8), (bool, "bool", 1),
                                         (complex, "complex", 16)]


def utf8_len(s: str) -> int:
    """Bytes of `s` as UTF-8, in bounded time (surrogates count as their 3-byte escape)."""
    n = str.__len__(s)
    if str.isascii(s):
        return n
    if n <= MAX_STR_SCAN:
        return len(str.encode(s, "utf-8", "surrogatepass"))
    head = str.__getitem__(s, slice(0, MAX_STR_SCAN))
    return len(str.encode(head, "utf-8", "surrogatepass")) * n // MAX_STR_SCAN


def scalar_of(t: type) -> tuple[str, int] | None:
    for st, kind, size in _SCALARS:
        if t is st:
            return kind, size
    return None


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
def walk_dict(w: Walk, d: dict, path: str, depth: int) -> None:
    """The entries of a real dict (or dict subclass, through dict's own iteration)."""
    tensor_t, tensor_leaf = FAST
    prefix = f"{path}." if path else ""
    fast = 0  # tensors taken by the shortcut: counted as walked nodes once, at the end
    for k, v in dict.items(d):
        if w.full:  # MAX_LEAVES, or HARD_NODES (visit sets `full` there)
            break
        p = f"{prefix}{k}" if type(k) is str and len(k) <= MAX_KEY_CHARS else join(path, k)
        if type(v) is tensor_t:  # the common case, without the generic dispatch
            fast += 1
            try:
                tensor_leaf(w, v, p)
                continue
            except Exception:
                pass
        visit(w, v, p, depth + 1)
    w.nodes += fast


def _dict(w: Walk, d: dict, path: str, depth: int) -> None:
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


# -- sequences -------------------------------------------------------------------
def _list(w: Walk, seq: list, path: str, depth: int) -> None:
    if enter(w, seq, path, depth):
        fold(w, list.__len__(seq), lambda i: list.__getitem__(seq, i), path, depth)


def _tuple(w: Walk, tup: tuple, path: str, depth: int) -> None:
    if not enter(w, tup, path, depth):
        return
    n = tuple.__len__(tup)
    if n > MAX_INDEXED_TUPLE:
        fold(w, n, lambda i: tuple.__getitem__(tup, i), path, depth)
        return
    for i in range(n):
        if w.full:
            return
        visit(w, tuple.__getitem__(tup, i), f"{path}[{i}]", depth + 1)


def _set(w: Walk, s: Any, path: str, depth: int) -> None:
    if not enter(w, s, path, depth):
        return
    base = set if introspect.has_base(type(s), set) else frozenset
    n = base.__len__(s)
    head = list(itertools.islice(base.__iter__(s), min(n, MAX_LIST_SCAN)))
    fold(w, n, head.__getitem__, path, depth, sample_from=len(head))


def fold(w: Walk, n: int, item_at: Callable[[int], Any], path: str, depth: int,
         sample_from: int | None = None) -> None:
    """Fold `n` elements into `[*]` leaves: one per field path, with count and summed bytes."""
    star = f"{path}[*]"
    if n == 0:
        w.add((star, "empty", (0,), "", "", 0, 0, None))
        return
    first = item_at(0)
    scalar = scalar_of(type(first))
    if scalar is not None and type(item_at((sample_from or n) - 1)) is type(first):
        # Lists of numbers (token ids, rewards) are sized by their length:
        # walking each one would cost a microsecond per element.
        w.leaf(star, scalar[0], (n,), "", scalar[1] * n, n)
        return
    merged, _ = sample(w, n, item_at, star, depth, sample_from)
    for leaf in merged:
        w.add(leaf)


def sample(w: Walk, n: int, item_at: Callable[[int], Any], path: str, depth: int,
           sample_from: int | None = None) -> tuple[list[Leaf], int]:
    """Walk a sample of `n` elements at `path`; (merged leaves, bytes of all n, estimated).

    The first element's cost (in walked nodes) sets how many more the budget
    allows; the sample is spread evenly over the elements. The sample's bytes
    are kept apart while it is walked, so they can be scaled to all `n`; its
    array pieces then join the hop's, so views are still counted once.
    """
    avail = sample_from or n
    saved = w.leaves, w.full, w.folded, w.pieces, w.plain
    w.folded, w.pieces, w.plain = True, {}, 0
    acc: dict[str, Leaf] = {}
    before = w.nodes
    scanned, k = 0, 1
    while scanned < k and (scanned == 0 or w.nodes < HARD_NODES):
        w.leaves, w.full = [], False
        visit(w, item_at(scanned * avail // k), path, depth + 1)
        _merge_into(acc, w.leaves)
        scanned += 1
        if scanned == 1:
            cost = max(1, w.nodes - before)
            k = min(avail, MAX_LIST_SCAN, max(1, (SOFT_NODES - w.nodes) // cost + 1))
    pieces, plain = w.pieces, w.plain
    extra = 0
    if scanned < n:
        extra = int((plain + sum(map(space_total, pieces.values()))) * (n / scanned - 1))
    w.leaves, w.full, w.folded, w.pieces, w.plain = saved
    w.plain += plain + extra
    for space, ps in pieces.items():
        outer = w.pieces.get(space)
        if outer is None:
            w.pieces[space] = ps
        else:
            outer.extend(ps)
    merged = list(acc.values())
    if scanned < n:
        scale = n / scanned
        merged = [leaf[:5] + (int(leaf[5] * scale), int(leaf[6] * scale), leaf[7])
                  for leaf in merged]
    return merged, sum(leaf[5] for leaf in merged)


def _merge_into(by_path: dict[str, Leaf], leaves: list[Leaf]) -> None:
    """Merge leaves of equal path: counts and bytes add up, shapes become ranges."""
    for leaf in leaves:
        prev = by_path.get(leaf[0])
        if prev is None:
            if len(by_path) < MAX_LEAVES:
                by_path[leaf[0]] = leaf
            continue
        shape = _merge_shape(prev[2], leaf[2])
        dtype = prev[3] if prev[3] == leaf[3] else "mixed"
        kind = prev[1] if prev[1] == leaf[1] else "mixed"
        by_path[leaf[0]] = (
            prev[0], kind, shape, dtype, prev[4], prev[5] + leaf[5], prev[6] + leaf[6], prev[7],
        )


def _merge_shape(a: tuple, b: tuple) -> tuple:
    if a == b:
        return a
    if len(a) != len(b):
        return ()
    out = []
    for x, y in zip(a, b):
        lo_x, hi_x = (x, x) if isinstance(x, int) else x
        lo_y, hi_y = (y, y) if isinstance(y, int) else y
        lo, hi = min(lo_x, lo_y), max(hi_x, hi_y)
        out.append(lo if lo == hi else (lo, hi))
    return tuple(out)


# -- objects -----------------------------------------------------------------------
def _fields_handler(getter: Any, slots: list[tuple[str, Any]]) -> Callable[..., None] | None:
    if getter is None and not slots:
        return None

    def handler(w: Walk, obj: Any, path: str, depth: int) -> None:
        if not enter(w, obj, path, depth):
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
    return handler


def _namedtuple_handler(names: tuple[str, ...]) -> Callable[..., None]:
    def handler(w: Walk, tup: tuple, path: str, depth: int) -> None:
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


for _t, _kind, _size in _SCALARS:
    register(_t, _scalar(_kind, _size))
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
register_fallback(resolve)
