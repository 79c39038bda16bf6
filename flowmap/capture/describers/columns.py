"""Folding a sequence column by column, where its elements share one shape.

`sample` walks a folded sequence element by element and merges the leaves by
path: a batch of 45 trajectory records costs 45 × 12 walked fields, ~1 µs
each in Python. When the elements are alike (strings, numbers, lists, dicts
with the same keys, records of one class) the merged leaves can be read per
column instead: every element's `uid` at once, one C-level pass for the types,
one for the lengths. `columns` does that, and declines (returns False, nothing
done) wherever the element walk would tell something the columns cannot: mixed
types, a container met twice, a depth or leaf bound reached, or a node budget
that would make `sample` stop part way. So the leaves, bytes, walked nodes and
seen containers are exactly what `sample` gives: the element walk stays the
reference, and the tests compare the two on every shape they take.

The element walk counts nodes in its own order, and an inner list is walked
whole only if the budget left then covers it: the fold reports how much room
its inner lists need, and `columns` checks it against the final count, an
upper bound of what was counted at any point before.

`ccolumns.c` is the C twin of `_fold`: there a column costs a few hundred
nanoseconds, so even a lone record's fields are read as a column of one
(`record`; a trajectory record 30 → 7 µs, a batch of 53 of them 946 → 64 µs).
In Python, reading by column only pays from a few elements up (`MIN_ITEMS`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate, chain, islice, repeat
from operator import is_, itemgetter
from typing import Any

from flowmap.capture.describers import accel
from flowmap.capture.describers.walk import (
    MAX_DEPTH,
    MAX_KEY_CHARS,
    MAX_LEAVES,
    MAX_STR_SCAN,
    SOFT_NODES,
    Leaf,
    Walk,
    handler_for,
    utf8_len,
)

MAX_LIST_SCAN = 2048
MAX_FIELDS = 512  # a record's fields walked (`containers._fields_handler`)
MAX_INDEXED_TUPLE = 16  # longer tuples are folded like lists (`containers._tuple`)

NUMBER_TYPES: list[tuple[type, str, int]] = [(int, "int", 8), (float, "float", 8), (bool, "bool", 1),
                                         (complex, "complex", 16)]

# Nodes each element costs: one figure for all, or one per element.
Costs = int | list[int]
# The merged leaves, the costs, the ids of the containers entered, the headroom the inner
# lists need (see `_lists`), and for each leaf the element it first appears in (None: the
# first element holds them all). The element walk merges leaves in the order they first
# appear, so a leaf that only a later element has (a longer tuple) comes after the first's.
Folded = tuple[list[Leaf], Costs, list[int], int, list[int] | None]
# How a record class's fields are read: its `__dict__` getter and its slots.
Fields = tuple[Any, list[tuple[str, Any]]]

_NONE = type(None)


def scalar_of(t: type) -> tuple[str, int] | None:
    """(kind, bytes) of a Python number type, by identity (no hashing of `t`)."""
    for st, kind, size in NUMBER_TYPES:
        if t is st:
            return kind, size
    return None


def mark_record(handler: Callable[..., None], fields: Fields) -> None:
    """Say that `handler` walks a record by these fields, so its columns can be read."""
    handler.__dict__["flowmap_fields"] = fields


def columns(w: Walk, items: list[Any] | tuple[Any, ...], star: str, depth: int) -> bool:
    """Fold `items` (an exact list or tuple at `depth`) into their merged leaves at `star`,
    column by column; False, and nothing done, where `sample` must walk them one by one."""
    n = len(items)
    if n > MAX_LIST_SCAN or n < MIN_ITEMS[0]:
        return False
    got = FOLD[0](items, star, depth + 1, fields_of)
    if got is None:
        return False
    leaves, first, total, ids, need, nbytes = got
    nodes = w.nodes
    # What `sample` decides after the first element: walk all n, and never reach the bound.
    if nodes + total + need > SOFT_NODES or (SOFT_NODES - nodes - first) // first + 1 < n:
        return False
    if len(leaves) > MAX_LEAVES:  # one element would fill the leaf bound on its own
        return False
    return _taken(w, leaves, total, ids, nbytes)


def record(w: Walk, obj: Any, path: str, depth: int, fields: Fields) -> bool:
    """One record's fields at `path`, read as a column of one: its walk (`visit` has counted
    the record itself) in a few C-level passes. Only where the C twin is built: in Python the
    field-by-field walk is as quick. False, and nothing done, wherever that walk must run."""
    if not RECORDS[0] or w.full:
        return False
    got = FOLD[0]((obj,), path, depth, fields_of, fields)
    if got is None:
        return False
    leaves, _, total, ids, need, nbytes = got
    total -= 1
    if w.nodes + total + need > SOFT_NODES or len(w.leaves) + len(leaves) > MAX_LEAVES:
        return False
    return _taken(w, leaves, total, ids, nbytes)


def _taken(w: Walk, leaves: list[Leaf], nodes: int, ids: list[int], nbytes: int) -> bool:
    """Add a fold to the walk, as `sample` and `Walk.add` would have, unless a container in it
    was met before (a `ref` leaf in the element walk)."""
    seen = set(ids)
    if len(seen) < len(ids) or not w.seen.isdisjoint(seen):
        return False
    w.seen.update(seen)
    w.nodes += nodes
    w.plain += nbytes
    room = MAX_LEAVES - len(w.leaves)
    if len(leaves) > room:  # the leaf past the bound is dropped and ends the walk
        leaves = leaves[:max(room, 0)]
        w.full = True
    w.leaves += leaves
    return True


def fields_of(t: type) -> Fields | None:
    """How records of class `t` are read, or None if `t` is walked some other way."""
    fields: Fields | None = handler_for(t).__dict__.get("flowmap_fields")
    return fields


def fold_columns(items: list[Any] | tuple[Any, ...], star: str, depth: int,
                 fields_of: Callable[[type], Fields | None] = fields_of,
                 fields: Fields | None = None,
                 ) -> tuple[list[Leaf], int, int, list[int], int, int] | None:
    """(merged leaves, nodes of the first element, nodes of all, ids of the containers entered,
    nodes the total must leave spare under the budget, the leaves' bytes) of `items` walked at
    `star` and `depth`, or None; `fields`, where given, is how the first item's class is read.
    `ccolumns.c` is the C twin."""
    if not items:
        return None
    if fields is not None:
        known, top, general = fields, type(items[0]), fields_of
        fields_of = lambda t: known if t is top else general(t)  # noqa: E731
    try:
        got = _fold(items, star, depth, fields_of)
    except Exception:  # anything unforeseen: the element walk has its own rules for it
        return None
    if got is None:
        return None
    leaves, costs, ids, need, _ = got
    nbytes = sum(leaf[5] for leaf in leaves)
    if type(costs) is int:
        return leaves, costs, costs * len(items), ids, need, nbytes
    return leaves, costs[0], sum(costs), ids, need, nbytes  # type: ignore[index, arg-type]


def _fold(items: Sequence[Any], star: str, depth: int,
          fields_of: Callable[[type], Fields | None]) -> Folded | None:
    """The merged leaves of `items`, each walked at `star` and `depth`; None if not all alike."""
    first = items[0]
    t = type(first)
    if not all(map(is_, map(type, items), repeat(t))):
        return None
    n = len(items)
    if t is str:
        lens = list(map(str.__len__, items))
        nbytes = sum(lens) if all(map(str.isascii, items)) else sum(map(utf8_len, items))
        return [(star, "str", (_span(lens),), "", "", nbytes, n, None)], 1, [], 0, None
    scalar = scalar_of(t)
    if scalar is not None:
        return [(star, scalar[0], (), "", "", scalar[1] * n, n, None)], 1, [], 0, None
    if t is _NONE:
        return [(star, "none", (), "", "", 0, n, None)], 1, [], 0, None
    if depth >= MAX_DEPTH:  # a container here is opaque
        return None
    if t is list:
        return _lists(items, star, depth, fields_of)
    if t is dict:
        return _dicts(items, star, depth, fields_of)
    if t is tuple:
        return _tuples(items, star, depth, fields_of)
    fields = fields_of(t)
    if fields is None:
        return None
    return _records(items, star, depth, t, fields, fields_of)


def _lists(items: Sequence[list[Any]], star: str, depth: int, fields_of: Any) -> Folded | None:
    lens = list(map(list.__len__, items))
    ids = list(map(id, items))
    inner = f"{star}[*]"
    if not all(lens):
        if any(lens):
            return None  # an empty list's leaf is `empty`, on its own path
        return [(inner, "empty", (0,), "", "", 0, 0, None)], 1, ids, 0, None
    number = type(items[0][0])
    scalar = scalar_of(number)
    if scalar is not None:  # each list sized by its length (`sample_list`'s first case)
        if not all(all(map(is_, map(type, map(itemgetter(end), items)), repeat(number)))
                   for end in (0, -1)):
            return None
        count = sum(lens)
        leaf = (inner, scalar[0], (_span(lens),), "", "", scalar[1] * count, count, None)
        return [leaf], 1, ids, 0, None
    if max(lens) > MAX_LIST_SCAN:
        return None  # such a list is sampled
    got = _fold(list(chain.from_iterable(items)), inner, depth + 1, fields_of)
    if got is None:
        return None
    leaves, c, inner_ids, need, firsts = got
    ids.extend(inner_ids)
    if firsts is not None:  # an element's index in the flat sequence -> its list's
        starts = list(accumulate(lens, initial=0))
        firsts = [bisect_right(starts, f) - 1 for f in firsts]
    if type(c) is int:  # every element alike: each list's walk stops nowhere the whole does not
        return leaves, [1 + c * k for k in lens], ids, need, firsts
    # Each list is `sample`d in the element walk, which walks all of it only if, after its
    # first element (cost c1), the budget left covers len × c1. The nodes counted before that
    # list are at most the payload's total less the list's own: `need` is what the total must
    # leave spare for the worst of them (`columns` checks it once the total is known).
    costs = []
    at = 0
    for k in lens:
        part = c[at:at + k]  # type: ignore[index]
        at += k
        costs.append(1 + sum(part))
        need = max(need, k * part[0] - sum(part))
    return leaves, costs, ids, need, firsts


def _dicts(items: Sequence[dict[Any, Any]], star: str, depth: int, fields_of: Any) -> Folded | None:
    keys = list(items[0])
    if not all(type(k) is str and len(k) <= MAX_KEY_CHARS for k in keys):
        return None  # other keys are spelled by `join`, cut or in brackets
    for d in islice(items, 1, None):
        other = list(d)  # compared only once all are exact str: no user `__eq__` runs
        if not (_all_str(other) and other == keys):
            return None
    rows = [list(d.values()) for d in items]
    return _columns(items, rows, [_path(star, k) for k in keys], depth, fields_of)


def _tuples(items: Sequence[tuple[Any, ...]], star: str, depth: int, fields_of: Any
            ) -> Folded | None:
    """Tuples of at most `MAX_INDEXED_TUPLE` items, each walked at `[i]`: the shapes in a list
    of tensor specs, say. Where lengths differ, column `i` holds the tuples long enough."""
    if max(map(len, items)) > MAX_INDEXED_TUPLE:
        return None  # a longer tuple is folded, not indexed
    return _columns(items, items, [f"{star}[{i}]" for i in range(max(map(len, items)))], depth,
                    fields_of)


def _records(items: Sequence[Any], star: str, depth: int, t: type, fields: Fields,
             fields_of: Any) -> Folded | None:
    """Records of one class, read as `containers._fields_handler` reads one."""
    getter, slots = fields
    rows: list[list[Any]] = []
    names: list[str] | None = None
    for obj in items:
        row: list[Any] = []
        keys: list[Any] = []
        if getter is not None:
            d = getter.__get__(obj, t)
            if type(d) is not dict or len(d) > MAX_FIELDS:
                return None
            keys = list(d)
            row = list(d.values())
        for name, descr in slots:
            keys.append(name)
            row.append(descr.__get__(obj, t))  # an unset slot raises: the element walk skips it
        if not _all_str(keys):
            return None  # a key of another type is no field
        if names is None:
            if not keys:
                return None  # no fields: opaque
            names = keys
        elif keys != names:
            return None
        rows.append(row)
    assert names is not None
    if any(len(k) > MAX_KEY_CHARS for k in names):
        return None  # `join` would cut it: left to the element walk
    public = [i for i, k in enumerate(names) if not k.startswith("_")]
    if public and len(public) < len(names):
        pick = itemgetter(*public)
        rows = [[pick(r)] if len(public) == 1 else list(pick(r)) for r in rows]
        names = [names[i] for i in public]
    return _columns(items, rows, [_path(star, k) for k in names], depth, fields_of)


def _path(star: str, key: str) -> str:
    return f"{star}.{key}" if star else key  # as `walk.join` spells it


def _all_str(keys: list[Any]) -> bool:
    return all(map(is_, map(type, keys), repeat(str)))


def _columns(items: Sequence[Any], rows: Sequence[Sequence[Any]], paths: list[str],
             depth: int, fields_of: Any) -> Folded | None:
    """Containers of one shape: column `j` (the rows that have a `j`-th value) folded at
    `paths[j]`, the leaves in the order the element walk first meets them."""
    n = len(items)
    leaves: list[Leaf] = []
    firsts: list[int] = []
    ids = list(map(id, items))
    unit, need = 1, 0
    per: list[int] | None = None
    for j, path in enumerate(paths):
        have = [i for i, r in enumerate(rows) if len(r) > j]
        got = _fold([rows[i][j] for i in have], path, depth + 1, fields_of)
        if got is None:
            return None
        leaves.extend(got[0])
        firsts.extend([have[0]] * len(got[0]) if got[4] is None else [have[f] for f in got[4]])
        ids.extend(got[2])
        need = max(need, got[3])
        c = got[1]
        if type(c) is int and len(have) == n:
            unit += c
            continue
        if per is None:
            per = [0] * n
        for k, i in enumerate(have):
            per[i] += c if type(c) is int else c[k]  # type: ignore[index]
    if len(leaves) > MAX_LEAVES:
        return None
    costs = unit if per is None else [unit + c for c in per]
    if not any(firsts):
        return leaves, costs, ids, need, None
    order = sorted(range(len(leaves)), key=firsts.__getitem__)  # stable: column order within
    return [leaves[k] for k in order], costs, ids, need, [firsts[k] for k in order]


def _span(lens: list[int]) -> Any:
    lo, hi = min(lens), max(lens)
    return lo if lo == hi else (lo, hi)


# The C twin where it is built; tests swap in the Python one to compare.
FOLD: list[Callable[..., tuple[list[Leaf], int, int, list[int], int, int] | None]] = [
    accel.fold_columns or fold_columns]
# Fewest elements read by column, and whether a lone record is: in Python a few records walk
# as fast one by one.
MIN_ITEMS = [1 if accel.fold_columns else 8]
RECORDS = [accel.fold_columns is not None]
if accel.configure_columns is not None:
    accel.configure_columns(MAX_DEPTH, MAX_KEY_CHARS, MAX_FIELDS, MAX_LIST_SCAN, MAX_INDEXED_TUPLE,
                            MAX_STR_SCAN, NUMBER_TYPES)

__all__ = ["MAX_LIST_SCAN", "NUMBER_TYPES", "columns", "fold_columns", "mark_record", "scalar_of"]
