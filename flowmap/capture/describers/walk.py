"""The walk over one payload: its bounds, its byte accounting, and dispatch by type.

Dispatch is by the payload's exact type, looked up by `id` (a dict keyed by the
type itself would call a metaclass's `__hash__`): one dict hit per node on the
hot path. A type met for the first time is resolved once, from its MRO, to a
handler, and the plan is cached.

Bytes are counted two ways. Content that has no address (strings, Python
numbers, estimates for the unsampled part of a long list) adds to `plain`.
Array storage adds a piece `(start, end, weight)` in an address space: `start..end`
is the byte range the array spans, `weight` the bytes it references (less than
the span for a strided slice, or an expanded tensor whose stride is 0). The
hop's total counts each group of overlapping pieces once: the lesser of its
union and the sum of its weights, so a view next to its base adds nothing and
an expanded tensor over 4 bytes is 4 bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flowmap.capture.describers import introspect
from flowmap.capture.describers.accel import disjoint_total as disjoint_total  # read by describe

MAX_DEPTH = 8
MAX_LEAVES = 256
# Storage keys per payload. Tensors inside a folded list have no leaf of their own but keep
# their storage key (up to this many), so a relay that re-wraps tensors in a list is known.
MAX_STORAGES = 256
# Walked objects per payload. Long lists are sampled to stay under the soft
# bound; nothing is walked past the hard one. A payload's cost is therefore
# bounded whatever it holds (a 10M-int tuple, 100k tensors, deep nesting).
SOFT_NODES = 4096
HARD_NODES = 4 * SOFT_NODES
MAX_KEY_CHARS = 48
MAX_NAME_CHARS = introspect.MAX_NAME_CHARS
MAX_PLANS = 4096
# A string longer than this is sized from its head's UTF-8 length.
MAX_STR_SCAN = 4096

# A shape's dims: ints, or a (min, max) pair where folded list elements differ.
Shape = tuple[Any, ...]
# (path, kind, shape, dtype, device, nbytes, count, dims)
Leaf = tuple[str, str, Shape, str, str, int, int, tuple[str, ...] | None]
Handler = Callable[["Walk", Any, str, int], None]
Piece = tuple[int, int, int]  # (start, end, referenced bytes)
# Where an array's data starts: the address alone in host memory ("cpu"), the
# common case, hashed as an int; (address, space) in any other address space.
StorageKey = int | tuple[int, str]


class Walk:
    """State of one `describe` call."""

    __slots__ = ("leaves", "pieces", "plain", "storages", "holders", "seen", "dims", "full",
                 "folded", "nodes")

    def __init__(self, dims: Mapping[str, tuple[str, ...]] | None):
        self.leaves: list[Leaf] = []
        self.pieces: dict[Any, list[Piece]] = {}  # address space -> pieces
        self.plain = 0
        self.storages: list[StorageKey] = []
        # The object behind each storage key, in step: the writer keeps a key's id only while
        # its holder lives, so an address a freed storage leaves is never the old one's id.
        self.holders: list[Any] = []
        self.seen: set[int] = set()
        self.dims = dims or None
        self.full = False
        self.folded = False  # inside a folded list: storage keys no longer line up with leaves
        self.nodes = 0

    def add(self, leaf: Leaf) -> None:
        if len(self.leaves) >= MAX_LEAVES:
            self.full = True
            return
        self.leaves.append(leaf)

    def leaf(self, path: str, kind: str, shape: Shape, dtype: str, nbytes: int,
             count: int = 1) -> None:
        """A leaf whose bytes have no address (strings, numbers)."""
        self.plain += nbytes
        self.add((path, kind, shape, dtype, "", nbytes, count, None))

    def opaque(self, path: str, t: type) -> None:
        self.add((path, "opaque", (), introspect.type_name(t), "", 0, 1, None))

    def piece(self, space: Any, start: int, end: int, weight: int) -> None:
        pieces = self.pieces.get(space)
        if pieces is None:
            self.pieces[space] = [(start, end, weight)]
        else:
            pieces.append((start, end, weight))

    def storage(self, start: int, space: str, holder: Any) -> None:
        if len(self.storages) < MAX_STORAGES:
            self.storages.append(start if space == "cpu" else (start, space))
            self.holders.append(holder)

    def over_budget(self) -> bool:
        return self.full or self.nodes >= HARD_NODES

    def total(self) -> int:
        return self.plain + sum(map(space_total, self.pieces.values()))


def space_total(pieces: list[Piece]) -> int:
    """Bytes of one address space: each group of overlapping pieces counted once."""
    if len(pieces) == 1:
        return pieces[0][2]
    if disjoint_total is not None:
        total = disjoint_total(pieces)
        if total is not None:
            return total
    pieces.sort()  # allocators hand out addresses in no order; sorting sorted pieces is cheap
    total = 0
    end = -1
    for a, b, wt in pieces:  # the common case: disjoint storages
        if a < end:
            return _overlapping_total(pieces)
        total += wt
        end = b
    return total


def _overlapping_total(pieces: list[Piece]) -> int:
    total = 0
    end = -1
    length = weight = n = 0
    prev = None
    for p in pieces:
        if p == prev:  # the same view met twice
            continue
        prev = p
        a, b, wt = p
        if a >= end:
            total += weight if n == 1 else min(length, weight)
            length, weight, n, end = b - a, wt, 1, b
        else:
            if b > end:
                length += b - end
                end = b
            weight += wt
            n += 1
    return total + (weight if n == 1 else min(length, weight))


# -- dispatch ------------------------------------------------------------------
PLANS: dict[int, tuple[type, Handler]] = {}
_BUILTIN_PLANS: dict[int, tuple[type, Handler]] = {}
Resolver = Callable[[type, tuple[type, ...]], "Handler | None"]
RESOLVERS: list[Resolver] = []  # library describers (torch, numpy, tabular, tensordict)
FALLBACK: list[Resolver] = []  # Python's own types and plain objects, tried last
# torch's dict walk (tensors read inline, without dispatch) once torch is loaded.
FAST: list[Any] = [None]


def register(t: type, handler: Handler) -> None:
    """A handler for exactly type `t` (builtins, and library types once their module loaded)."""
    PLANS[id(t)] = _BUILTIN_PLANS[id(t)] = (t, handler)


def register_resolver(resolver: Resolver) -> None:
    RESOLVERS.append(resolver)


def register_fallback(resolver: Resolver) -> None:
    FALLBACK.append(resolver)


def handler_for(t: type) -> Handler:
    entry = PLANS.get(id(t))
    if entry is not None and entry[0] is t:
        return entry[1]
    return _resolve(t)


def _resolve(t: type) -> Handler:
    try:
        mro = introspect.mro(t)
        handler = None
        for resolver in RESOLVERS + FALLBACK:
            handler = resolver(t, mro)
            if handler is not None:
                break
    except Exception:  # e.g. a library half-imported: opaque now, resolved again next time
        return _opaque
    if handler is None:
        handler = _opaque
    if len(PLANS) >= MAX_PLANS:  # classes made on the fly: keep the cache bounded
        PLANS.clear()
        PLANS.update(_BUILTIN_PLANS)
    PLANS[id(t)] = (t, handler)
    return handler


def _opaque(w: Walk, obj: Any, path: str, depth: int) -> None:
    w.opaque(path, type(obj))


def visit(w: Walk, obj: Any, path: str, depth: int) -> None:
    """Describe `obj` at `path`; whatever it does, it ends as leaves, never as an exception."""
    w.nodes += 1
    if w.nodes >= HARD_NODES:
        w.full = True
        return
    t = type(obj)
    entry = PLANS.get(id(t))
    handler = entry[1] if entry is not None and entry[0] is t else _resolve(t)
    try:
        handler(w, obj, path, depth)
    except Exception:
        w.opaque(path, t)


def enter(w: Walk, obj: Any, path: str, depth: int) -> bool:
    """Before walking into a container: False (and a leaf said why) if it must not be."""
    if depth >= MAX_DEPTH:
        w.opaque(path, type(obj))
        return False
    key = id(obj)
    if key in w.seen:
        # A container met twice (a cycle or a shared reference): its bytes
        # were already counted where it first appeared.
        w.add((path, "ref", (), introspect.type_name(type(obj)), "", 0, 1, None))
        return False
    w.seen.add(key)
    return True


def cached_name(cache: dict[Any, str], obj: Any, prefix: str = "") -> str:
    """`str(obj)` without `prefix`, computed once per dtype or device object."""
    name = cache.get(obj)
    if name is None:
        name = cache[obj] = short(str(obj).removeprefix(prefix))
    return name


def short(name: str) -> str:
    """A dtype or type name cut to a bounded length (a struct dtype can spell 1,000 fields)."""
    return name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…"


def utf8_len(s: str) -> int:
    """Bytes of `s` as UTF-8, in bounded time (surrogates count as their 3-byte escape)."""
    n = str.__len__(s)
    if str.isascii(s):
        return n
    if n <= MAX_STR_SCAN:
        return len(str.encode(s, "utf-8", "surrogatepass"))
    head = str.__getitem__(s, slice(0, MAX_STR_SCAN))
    return len(str.encode(head, "utf-8", "surrogatepass")) * n // MAX_STR_SCAN


def key_text(k: Any) -> str:
    """A mapping key or field name as path text, without calling its `__format__`/`__str__`."""
    t = type(k)
    s: str
    if t is str:
        s = k
    elif t is int:
        s = repr(k) if -(10**18) < k < 10**18 else "<int>"  # a huge int's repr is quadratic
    elif t is bool or t is float or k is None:
        s = repr(k)  # builtin reprs only
    elif introspect.has_base(t, str):
        s = str.__str__(k)
    else:
        return f"<{introspect.type_name(t)}>"
    return s if len(s) <= MAX_KEY_CHARS else s[:MAX_KEY_CHARS] + "…"


def join(prefix: str, k: Any) -> str:
    if type(k) is str and len(k) <= MAX_KEY_CHARS:
        return f"{prefix}.{k}" if prefix else k
    key = key_text(k)
    return f"{prefix}.{key}" if prefix else key
