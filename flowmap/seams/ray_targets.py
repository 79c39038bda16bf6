"""Seam-map targets that are Ray tasks or actor methods: named, never wrapped.

A seam map may name a Ray remote function (`jobs:make_prompts`) or a method
of an actor class (`jobs:Learner.train`), which is what `flowmap discover`
proposes for a Ray pipeline. Wrapping the object `ray.remote` returned would
break `.remote`, and flowmap's Ray integration records those calls already,
with the arguments as the callee received them. So the integration looks the
target up here at each submission and in the worker that runs it, and records
the call under the map's words, read through the same `Plan` a wrapped Python
target records with (`flowmap.seams.plan`): a task runs as the map's `owner`,
an actor of a class with a mapped method is `<owner>/<n>` (unless it has a Ray
name); the call hop takes `name` and the arguments `args` selects, inline or
by ref, with `dims`, `items` and `step`; the result hop, recorded where the
caller resolves its ref, takes `result_name`, `dims` and `items` of the result;
`call`, `result`, `caller` and `also` apply as for a Python target.

The submitting side uses the entries the patcher found to be Ray targets
(`claim`); a plain class made an actor later (`ray.remote(Learner)`) keeps its
wrapped methods and is not claimed. The worker that runs a claimed call (the
submitter says so) finds the entry among all those of the maps it loaded
(`know`): Ray may ship a task to it by value, and it then never imports the
module the map names.

This table belongs to the seam maps (the patcher fills it, without importing
Ray); the Ray integration, a layer above, reads it.

`split_by` and `transport` do not apply (`NOT_FOR_RAY` says why); the
process that reports the run warns once per such entry.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from flowmap.seams.plan import Plan
    from flowmap.seams.spec import SeamSpec

# The keys of a seam-map entry that a Ray target cannot honour, with the reason.
NOT_FOR_RAY = {
    "split_by": "its arguments reach the worker as fresh copies at every call, so their "
                "identity cannot tell calls apart (each actor is already an instance of its own)",
    "transport": "a Ray call's transport is how its bytes moved: `rpc` inline, `shm` by ref, "
                 "`ref` for a handle passed on",
}


class Claim(NamedTuple):
    owner: str
    name: str  # the call hop's payload name
    result_name: str
    plan: Plan  # what the call and the result record (`flowmap.seams.plan`)


_known: dict[tuple[str, str], Claim] = {}  # (module, qualname) -> the map's entry
_claimed: set[tuple[str, str]] = set()  # the entries whose target is a Ray one, found here


def is_ray(obj: Any) -> bool:
    """A Ray remote function or actor class (without importing Ray)."""
    kinds = tuple(k for k in (getattr(sys.modules.get("ray.actor"), "ActorClass", None),
                              getattr(sys.modules.get("ray.remote_function"), "RemoteFunction",
                                      None)) if isinstance(k, type))
    return bool(kinds) and isinstance(obj, kinds)


def know(specs: Iterable[SeamSpec]) -> None:
    """The entries of a seam map loaded in this process (the patcher, as it installs)."""
    from flowmap.seams.plan import Plan

    for spec in specs:
        _known[(spec.module, spec.qualname)] = Claim(
            spec.owner, spec.name, spec.result_name, Plan(spec))


def claim(spec: SeamSpec) -> None:
    """The patcher found `spec`'s target to be a Ray task or actor method."""
    if (spec.module, spec.qualname) not in _known:
        know([spec])
    _claimed.add((spec.module, spec.qualname))


def ignored(spec: SeamSpec) -> list[str]:
    """The keys `spec` sets that a Ray target does not honour."""
    return [key for key, set_ in (("split_by", bool(spec.split_by)),
                                  ("transport", spec.transport != "ref")) if set_]


def of(module: str, qualname: str) -> Claim | None:
    """The entry of a claimed Ray target (on the submitting side)."""
    return _known.get((module, qualname)) if (module, qualname) in _claimed else None


def in_worker(module: str, qualname: str) -> Claim | None:
    """The entry of a call the submitter said was claimed (in the worker that runs it)."""
    return _known.get((module, qualname))


def actor_owner(module: str, class_qualname: str) -> str | None:
    """The owner a seam map gave any method of this actor class (the first in the map)."""
    if not _claimed:
        return None
    prefix = class_qualname + "."
    for key, c in _known.items():
        if key in _claimed and key[0] == module and key[1].startswith(prefix):
            return c.owner
    return None
