"""Read a type and an instance without running any of the user's code.

`getattr`, `hasattr`, `isinstance` and f-strings all reach for hooks a user can
override: `__getattr__`, `__getattribute__`, `__class__`, a metaclass's
`__instancecheck__` or `__hash__`, `__format__`. Describing a payload must not
run them (a blocking `__getattr__` would stall the hop; a lazy one would load
data). So everything here goes through the C-level descriptors of `type` and
`object` and reads only what the instance itself stores: its `__dict__`, its
slots, a type's own namespace along its MRO.
"""

from __future__ import annotations

import types
from typing import Any

_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_DICT = type.__dict__["__dict__"]
_TYPE_NAME = type.__dict__["__name__"]
_TYPE_MODULE = type.__dict__["__module__"]
_TYPE_FLAGS = type.__dict__["__flags__"]
_HEAPTYPE = 1 << 9
MAX_NAME_CHARS = 64


def mro(t: type) -> tuple[type, ...]:
    """`t.__mro__`, even where a metaclass shadows the attribute."""
    return _TYPE_MRO.__get__(t, type)  # type: ignore[no-any-return]


def namespace(t: type) -> types.MappingProxyType[str, Any]:
    """A class's own namespace (a read-only view of the real dict)."""
    return _TYPE_DICT.__get__(t, type)  # type: ignore[no-any-return]


def type_name(t: type) -> str:
    """The class name, cut to a bounded length (a name is user data too)."""
    name = _TYPE_NAME.__get__(t, type)
    if type(name) is not str:
        return "?"
    return name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…"


def type_module(t: type) -> str:
    mod = _TYPE_MODULE.__get__(t, type)
    return mod if type(mod) is str else ""


def is_heap_type(t: type) -> bool:
    """A class defined in Python (not a builtin or extension type)."""
    return bool(_TYPE_FLAGS.__get__(t, type) & _HEAPTYPE)


def class_attr(t: type, name: str) -> Any:
    """`name` looked up along the MRO in the classes' own namespaces (None if absent)."""
    for klass in mro(t):
        ns = namespace(klass)
        if name in ns:
            return ns[name]
    return None


def has_base(t: type, base: type | None) -> bool:
    return base is not None and any(k is base for k in mro(t))


def dict_getter(t: type) -> Any:
    """The C descriptor that returns an instance's `__dict__`, or None.

    A class may define `__dict__` itself (a property); then there is no safe
    way to its instance dict and the object has none for us.
    """
    descr = class_attr(t, "__dict__")
    return descr if type(descr) is types.GetSetDescriptorType else None


def slot_getters(t: type) -> list[tuple[str, Any]]:
    """(name, member descriptor) for every slot along the MRO, base classes first."""
    out: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for klass in reversed(mro(t)):
        ns = namespace(klass)
        slots = ns.get("__slots__", ())
        ts = type(slots)
        names = (slots,) if ts is str else slots if ts is tuple or ts is list else ()
        for name in names:
            if type(name) is not str or name in seen or name in ("__dict__", "__weakref__"):
                continue
            descr = ns.get(name)
            if type(descr) is types.MemberDescriptorType:
                seen.add(name)
                out.append((name, descr))
    return out


def instance_dict(obj: Any) -> dict[str, Any] | None:
    """The instance's own `__dict__` (a real dict), read through the type's descriptor."""
    getter = dict_getter(type(obj))
    if getter is None:
        return None
    try:
        d = getter.__get__(obj, type(obj))
    except Exception:
        return None
    return d if type(d) is dict else None
