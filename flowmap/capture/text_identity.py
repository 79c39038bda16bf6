"""Which strings (and floats) a hop of text carries, as ids that never link two different ones.

A payload of text has no storage to follow: the flow (`flowmap.model.flow`) tells
prompts handed on from completions written for them by their figures alone (count,
lengths), and a generator that writes as many strings of the prompts' lengths reads as
passing the prompts on. The string objects themselves tell: a relay hands on the very
objects it got, a generator makes new ones. Numbers alike: a list of rewards handed on
is the very float objects, advantages computed from them are new ones (ints are not
taken: CPython shares the small ones). Objects a program shares are no one's either: the
constants of its code, as a reward function's `1.0` and `0.0` (one object however often
it returns it) and name-like strings CPython interns (`"yes"`, `"no"`). A list whose
first 8 elements repeat a float or string object, or hold an interned string, is named
as itself instead: a relay hands on that list, a stage that scores anew builds another
(such a tuple is not named at all: it may be a constant too). So is a list of ints
(token ids as lists, whose small values CPython shares). But an object's address is
handed to the next object once it is freed, and neither can be weakly referenced. So the
table *holds* each string it has given an id, for as long as it keeps the id: while
held, no other object can have its address. The oldest are let go past `MAX_HELD`
strings or `MAX_HELD_CHARS` characters (then that string, met again, gets a new id: a
missed link, never a false one).

Cost, metadata only: a bounded walk of exact lists, tuples and dicts for at most
`MAX_STRINGS` strings (no string is read or copied), one dict look-up each, and the
strings held a little longer than the program holds them (docs/performance.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from flowmap import environment

# the C read of a string's interned flag (`cinterned.c`), where built
interned: Callable[[object], bool] | None = None
if not environment.pure_python():
    try:
        from flowmap.capture.cinterned import interned
    except ImportError:
        pass

MAX_STRINGS = 128  # objects taken per hop: the first found, walking the payload in order
PER_CONTAINER = 64  # of each list or tuple, its first elements (a batch of prompts, whole)
MAX_NODES = 256  # containers and leaves walked per hop, at most
MAX_DEPTH = 4
MIN_CHARS = 2  # shorter strings are shared singletons (CPython caches one-character strings)
MAX_HELD = 4096  # strings held at most (a few hundred hops of text)
MAX_HELD_CHARS = 16 << 20  # characters held at most
MAX_STRING_CHARS = 1 << 20  # a longer string is not held: it gets no id
MAX_SHARED_LIST = 1 << 16  # a longer list of shared objects is not held: it gets no id
SHARED_WINDOW = 8  # of each list or tuple, the elements read for an object met twice


def strings_of(payload: Any) -> list[Any]:  # replaced by its C twin below, where built
    """The first strings and floats of `payload`, in walk order, at most `PER_CONTAINER` of
    each list or tuple (so a dict of prompts and completions names both): only exact
    `str`, `float`, `list`, `tuple` and `dict` are entered (never a subclass, so none of
    the program's code runs), and a dataclass's instance dict, read through its type's
    descriptor; dict values only (keys are field names, the same in every message)."""
    if type(payload) is list and payload and type(payload[0]) is str:  # the common text hop
        found = [s for s in payload[:PER_CONTAINER] if type(s) is str
                 and MIN_CHARS <= len(s) <= MAX_STRING_CHARS]
        if len(found) == min(len(payload), PER_CONTAINER):
            if not _shared(payload[:SHARED_WINDOW]):
                return found
            return [payload] if len(payload) <= MAX_SHARED_LIST else []
    found = []
    stack: list[tuple[Any, int]] = [(payload, 0)]
    nodes = 0
    while stack and nodes < MAX_NODES:
        obj, depth = stack.pop()
        nodes += 1
        t = type(obj)
        if t is str or t is float:
            if t is float or (MIN_CHARS <= len(obj) <= MAX_STRING_CHARS
                              and not (interned is not None and interned(obj))):
                found.append(obj)
                if len(found) >= MAX_STRINGS:
                    break
        elif depth < MAX_DEPTH:
            below = depth + 1
            if t is list or t is tuple:
                head = obj[:PER_CONTAINER]
                if _shared(obj[:SHARED_WINDOW]) or (t is list and _ints(head)):  # the list itself
                    if t is list and len(obj) <= MAX_SHARED_LIST:  # a tuple may be a constant
                        found.append(obj)
                        if len(found) >= MAX_STRINGS:
                            break
                    continue
                stack += [(v, below) for v in head[::-1]]
            elif t is dict:
                stack += [(v, below) for v in [*dict.values(obj)][:MAX_NODES][::-1]]
            else:  # a dataclass's fields: a trajectory's score set on it
                getter = _RECORDS.get(t, _UNKNOWN)
                if getter is _UNKNOWN:
                    getter = _record_dict(t)
                if getter is not None:
                    fields = getter.__get__(obj, t)
                    if type(fields) is dict:
                        stack += [(v, below) for v in [*dict.values(fields)][:MAX_NODES][::-1]]
    return found


# a process pool's task and result, whose fields carry the submitter's strings and floats
EXECUTOR_ITEMS = {("concurrent.futures.process", "_CallItem"),
                  ("concurrent.futures.process", "_ResultItem")}
_UNKNOWN = object()
_RECORDS: dict[type, Any] = {}  # class -> the descriptor of a dataclass's instance dict, or None


def _record_dict(t: type) -> Any:
    """The C descriptor that returns the instance dict of a dataclass `t` (or a process
    pool's task or result), None for any other class (or one that defines `__dict__`
    itself), read from the class's namespaces: no code of the class runs (`introspect`)."""
    from flowmap.capture.describers import introspect  # the boot loads no describer

    if len(_RECORDS) >= 4096:
        _RECORDS.clear()
    getter = None
    if introspect.is_heap_type(t) and (
            introspect.class_attr(t, "__dataclass_fields__") is not None
            or (introspect.type_module(t), introspect.type_name(t)) in EXECUTOR_ITEMS):
        getter = introspect.dict_getter(t)
    _RECORDS[t] = getter
    return getter


def _shared(window: list[Any] | tuple[Any, ...]) -> bool:
    """Whether a list's first elements (`SHARED_WINDOW`) are objects the program shares:
    one float or string object twice (a constant of its code, an entry of a table of
    them: graded scores, templated observations), or an interned string."""
    seen: set[int] = set()
    for v in window:
        t = type(v)
        if t is float or t is str:
            if id(v) in seen or (t is str and interned is not None and interned(v)):
                return True
            seen.add(id(v))
    return False


def _ints(head: list[Any]) -> bool:
    """Whether a list's first elements are ints (token ids): CPython shares the small ones,
    so the list a stage built, not they, says whose they are."""
    return bool(head) and all(type(v) is int for v in head)


def _weight(obj: Any) -> int:
    """What holding `obj` counts against `MAX_HELD_CHARS`: a string's characters, a list's
    bytes in characters' stead (a slot and an int object, 36 bytes, each element)."""
    t = type(obj)
    return len(obj) if t is str else 36 * len(obj) if t is list else 1


class TextKeys:
    """This process's ids of the strings its hops carried, each held while its id is kept."""

    def __init__(self) -> None:
        self.held: dict[int, tuple[int, Any]] = {}  # address -> (id, the object itself)
        # the addresses in the order they were taken: letting the oldest go from the dict's
        # front would walk past every slot deleted before, until the dict is rebuilt
        self.order: deque[int] = deque()
        self.chars = 0
        self.next_id = 1

    def keys(self, strings: list[Any]) -> list[int]:
        """One id per object; one met before and still held keeps its id."""
        held, order = self.held, self.order
        out = []
        for s in strings:
            at = id(s)
            entry = held.get(at)  # held: no other object can be at that address
            if entry is None:
                entry = held[at] = (self.next_id, s)
                self.next_id += 1
                order.append(at)
                self.chars += _weight(s)
            out.append(entry[0])
        while len(held) > MAX_HELD or self.chars > MAX_HELD_CHARS:  # let the oldest go
            _, s = held.pop(order.popleft())
            self.chars -= _weight(s)
        return out


def new_keys() -> TextKeys:
    """A process's table of ids, in C where built (the same ids, about a quarter of the
    cost: 1.0 against 3.5 µs for seven new strings, `timeit`)."""
    if ctext is not None:
        keys: TextKeys = ctext.Keys(MAX_HELD, MAX_HELD_CHARS)  # the same methods
        return keys
    return TextKeys()


python_strings_of = strings_of  # the walk in Python, which the C twin follows step for step
ctext: Any = None
if not environment.pure_python():
    try:
        from flowmap.capture import ctext
    except ImportError:
        pass
    else:
        ctext.configure(_RECORDS, _record_dict)
        strings_of = ctext.strings_of
