"""An event's fields by name, each read as the type the format's table gives it.

`flowmap.trace_format.EVENTS` names every field of every event kind and says
its type; `Fields` reads an event through that table instead of by position,
so a builder says `f.time_ns("t_first_us")` where it once said `ev[16]`, a
field added to the table moves no index here, and asking for a field as a
type the table does not give it fails at once. Interned ids come back as
their text or schema, times on the host's monotonic clock. The hop, the one
event a trace holds millions of, is still read by position in `reader` (a
call per field there would cost the scale targets); rarer events come here,
already checked against the table (`flowmap.read.validate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from flowmap import trace_format as tf
from flowmap.read.events import Leaf

# kind -> field name -> (position in the event array, field type)
_INDEX: dict[str, dict[str, tuple[int, str]]] = {
    kind: {name: (i, ftype) for i, (name, ftype) in enumerate(fields, start=1)}
    for kind, fields in tf.EVENTS.items()
}


@dataclass(slots=True)
class Interned:
    """What a shard's earlier lines defined, for reading its next ones."""

    pid: int
    t0_ns: int  # the shard's `t0_mono_ns`: event times are microseconds after it
    strings: dict[int, str]
    schemas: dict[int, tuple[Leaf, ...]]


class Fields:
    """One checked event of a shard, its fields read by name."""

    __slots__ = ("_at", "_ev", "_index")

    def __init__(self, ev: Sequence[object], at: Interned) -> None:
        self._ev = ev
        self._at = at
        self._index = _INDEX[cast(str, ev[0])]

    def _raw(self, name: str, *types: str) -> object:
        i, ftype = self._index[name]
        if ftype not in types:
            raise TypeError(f"field {name!r} of a {self._ev[0]!r} event is a {ftype}")
        return self._ev[i]

    def text(self, name: str) -> str:
        """An interned string's text."""
        return self._at.strings[cast(int, self._raw(name, tf.STR_REF))]

    def leaves(self, name: str) -> tuple[Leaf, ...]:
        """An interned schema's leaves."""
        return self._at.schemas[cast(int, self._raw(name, tf.SCHEMA_REF))]

    def time_ns(self, name: str) -> int:
        """A time, on the host's monotonic clock."""
        return self._at.t0_ns + cast(int, self._raw(name, tf.TIME)) * 1000

    def count(self, name: str) -> int:
        return cast(int, self._raw(name, tf.COUNT))

    def opt_int(self, name: str) -> int | None:
        return cast("int | None", self._raw(name, tf.OPT_INT))

    def number(self, name: str) -> float:
        return float(cast(float, self._raw(name, tf.NUMBER)))
