"""Seam-map targets that are Ray tasks or actor methods: named, never wrapped.

A seam map may name a Ray remote function (`jobs:make_prompts`) or a method
of an actor class (`jobs:Learner.train`), which is what `flowmap discover`
proposes for a Ray pipeline. Wrapping the object `ray.remote` returned would
break `.remote`, and flowmap's Ray integration records those calls already,
with the arguments as the callee received them. So the patcher hands such a
target here instead, and the integration, which looks it up at each
submission, records the call under the map's words: a task runs as the map's
`owner`, an actor of a class with a claimed method is `<owner>/<n>` (unless
it has a Ray name), and the call and result hops take the map's `name` and
`result_name`. What a wrapper would add (args, dims, split_by, items) does
not apply: the integration records every inline argument and ref.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple


class Claim(NamedTuple):
    owner: str
    name: str  # the call hop's payload name
    result_name: str


_claims: dict[tuple[str, str], Claim] = {}  # (module, qualname) -> the map's words


def is_ray(obj: Any) -> bool:
    """A Ray remote function or actor class (without importing Ray)."""
    kinds = tuple(k for k in (getattr(sys.modules.get("ray.actor"), "ActorClass", None),
                              getattr(sys.modules.get("ray.remote_function"), "RemoteFunction",
                                      None)) if isinstance(k, type))
    return bool(kinds) and isinstance(obj, kinds)


def claim(module: str, qualname: str, owner: str, name: str, result_name: str) -> None:
    _claims[(module, qualname)] = Claim(owner, name, result_name)


def of(module: str, qualname: str) -> Claim | None:
    return _claims.get((module, qualname)) if _claims else None


def actor_owner(module: str, class_qualname: str) -> str | None:
    """The owner a seam map gave any method of this actor class (the first in the map)."""
    if not _claims:
        return None
    prefix = class_qualname + "."
    for (mod, qual), c in _claims.items():
        if mod == module and qual.startswith(prefix):
            return c.owner
    return None
