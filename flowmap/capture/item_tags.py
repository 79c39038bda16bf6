"""Item ids a program attaches to an object before a transport sends it (`flowmap.tag_items`).

A queue's `put` or a pipe's `send` is recorded by the transport hooks
(flowmap/integrations/transports), which see the object but not which logical
items (trajectory ids) ride on it; without them a `flowmap.drop` of those items
later has no bytes to count. The program names them once, at the put:
`q.put(flowmap.tag_items(traj, [traj.uid]))`, and the send half carries them.

The table holds the tagged object itself until it is sent (so an id reused by a
new object never takes another's items) and at most `MAX_TAGGED` of them, the
oldest let go first: a tagged object that never crosses a hooked transport
costs one entry for a while.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

MAX_TAGGED = 4096

_lock = threading.Lock()
_tagged: OrderedDict[int, tuple[Any, list[Any]]] = OrderedDict()


def put(obj: Any, items: list[Any]) -> None:
    with _lock:
        _tagged[id(obj)] = (obj, items)
        _tagged.move_to_end(id(obj))
        while len(_tagged) > MAX_TAGGED:
            _tagged.popitem(last=False)


def take(obj: Any) -> list[Any] | None:
    """The items tagged on `obj` (forgotten once taken), or None."""
    if not _tagged:
        return None
    with _lock:
        entry = _tagged.get(id(obj))
        if entry is None or entry[0] is not obj:
            return None
        del _tagged[id(obj)]
        return entry[1]
