"""The object refs a Ray process holds: who made each, and where its reply is recorded.

A Ray call hands its caller a ref, not the result. The result only moves to
the caller when the caller resolves the ref (`ray.get`); a caller that passes
the ref on to another task or actor held a handle of a few bytes, and the
result travels from the producer to that callee directly (the callee records
that hop, `flowmap.integrations.ray_callee`). So the reply hop
`<callee> -> <caller>` is recorded here, on the caller's side:

- when the caller resolves the ref: transport `rpc`, the result as payload;
- when the caller first passes the unresolved ref on: transport `ref`, the
  ref itself as payload, counted as the handle it is (its id's bytes), not as
  the object it points to.

A ref that is dropped, or only awaited (`await ref`, `ref.future()`), records
no reply. The tables are bounded: past `MAX_REMEMBERED_REFS` they start over.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowmap.capture import calls, state
from flowmap.capture.describers import walk

if TYPE_CHECKING:
    from flowmap.seams.plan import Plan

OBJECT_STORE = "object_store"
MAX_REMEMBERED_REFS = 100_000

# ref hex -> the task or actor whose call returned it
producers: dict[str, str] = {}
# ref hex -> [producer, caller, payload name, passed on already, seam-map plan or None]
_replies: dict[str, list[Any]] = {}
# (caller, payload name, the seam-map entry's `Plan` when a map names the target)
Reply = tuple[str, str, "Plan | None"]


def bounded_set(table: dict[str, Any], key: str, value: Any) -> None:
    if len(table) >= MAX_REMEMBERED_REFS:
        table.clear()
    table[key] = value


def remember(out: Any, producer: str, reply: Reply | None = None) -> None:
    """Note who made the refs a submission returned; `reply=(caller, name, plan)` when their
    resolution is ours to record (not when an integration had the callee record it, nor
    when a seam map says `result: false`)."""
    import ray

    refs = out if isinstance(out, (list, tuple)) else [out]
    for ref in refs:
        if isinstance(ref, ray.ObjectRef):
            key = ref.hex()
            bounded_set(producers, key, producer)
            if reply is not None:
                bounded_set(_replies, key, [producer, reply[0], reply[1], False, reply[2]])


def producer_of(ref: Any) -> str:
    """The owner whose call returned `ref`; `object_store` for `ray.put` and unknown refs."""
    return producers.get(ref.hex(), OBJECT_STORE)


def passed_on(ref: Any) -> None:
    """The caller hands an unresolved ref to another call: a `ref` hop of the handle."""
    entry = _replies.get(ref.hex())
    t = state.tracer
    if entry is None or entry[3] or t is None:
        return
    entry[3] = True
    t.hop(src=entry[0], dst=entry[1], payload=calls.reply(ref), name=entry[2], items=(),
          step=None, version=None, transport="ref", dims=None)


def wrap_get(get: Callable[..., Any]) -> Callable[..., Any]:
    """`ray.get` that records, once per ref, the reply it resolves."""

    @functools.wraps(get)
    def flowmap_get(object_refs: Any, *args: Any, **kwargs: Any) -> Any:
        out = get(object_refs, *args, **kwargs)
        t = state.tracer
        if t is not None and _replies:
            try:
                _resolved(t, object_refs, out)
            except Exception as exc:
                t.error(exc)
        return out

    return flowmap_get


def _resolved(t: Any, object_refs: Any, out: Any) -> None:
    import ray

    if isinstance(object_refs, ray.ObjectRef):
        pairs: list[tuple[Any, Any]] = [(object_refs, out)]
    elif isinstance(object_refs, (list, tuple)) and isinstance(out, list):
        pairs = list(zip(object_refs, out))
    else:
        return
    for ref, value in pairs:
        entry = _replies.pop(ref.hex(), None) if isinstance(ref, ray.ObjectRef) else None
        if entry is None:
            continue
        plan = entry[4]
        if plan is None:
            t.hop(src=entry[0], dst=entry[1], payload=calls.reply(value), name=entry[2],
                  items=(), step=None, version=None, transport="rpc", dims=None)
            continue
        # a seam map's entry: its result `dims`, `items` and `also`, as a wrapped target has
        import flowmap.seams.plan as seam_plan  # loaded with the map that made `plan`

        root = {calls.RESULT: value}
        seam_plan.result_hop(t, plan, entry[0], entry[1], value, root, "rpc")
        seam_plan.extra_hops(t, root, plan.result_also, "rpc")


def describe_refs_as_handles(ref_type: type) -> None:
    """An ObjectRef in a payload is a handle: its id's bytes, never the object behind it."""

    def handle(w: walk.Walk, obj: Any, path: str, depth: int) -> None:
        w.leaf(path, "opaque", (), "ObjectRef", len(obj.binary()))

    walk.register(ref_type, handle)
