"""An event's fields by name, each resolved by its type in the format's table.

`flowmap.trace_format.EVENTS` names every field of every event kind and says
its type; this reads an event through that table instead of by position, so
a builder says `fields["t_first_us"]` where it once said `ev[16]`, and a field
added to the table moves no index here. Interned ids come back as their text
or schema, times on the host's monotonic clock. The hop, the one event a
trace holds millions of, is still read by position in `reader` (a call per
field there would cost the scale targets); rarer events come here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowmap import trace_format as tf
from flowmap.read.events import Leaf


@dataclass(slots=True)
class Interned:
    """What a shard's earlier lines defined, for reading its next ones."""

    pid: int
    t0_ns: int  # the shard's `t0_mono_ns`: event times are microseconds after it
    strings: dict[int, str]
    schemas: dict[int, tuple[Leaf, ...]]

    def time_ns(self, t_us: int) -> int:
        return self.t0_ns + t_us * 1000


def named(ev: list[Any], at: Interned) -> dict[str, Any]:
    """The checked event `ev` as `{field name: value}`: ids resolved, times in ns.

    Optional fields an older writer left out are absent from the result.
    """
    out: dict[str, Any] = {}
    for (name, ftype), v in zip(tf.EVENTS[ev[0]], ev[1:]):
        if ftype == tf.STR_REF:
            v = at.strings[v]
        elif ftype == tf.SCHEMA_REF:
            v = at.schemas[v]
        elif ftype == tf.TIME:
            v = at.time_ns(v)
        out[name] = v
    return out
