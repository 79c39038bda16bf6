"""The function that replaces a seam-map target: records its hops, then calls it.

It records exactly what `flowmap.seam` records — a call is a hop
`<caller> -> owner` whose payload is the selected arguments by name, the
return value a hop `owner -> <caller>`, the body runs as `owner` — plus what
only a seam map can say without code: item ids and dimension names by path,
the training step read from an argument, and hops derived from a field of
the arguments or result (`also`). Anything flowmap fails at is counted on the
tracer's error path; the user's function always runs, with its own
arguments, and its own exceptions pass through untouched.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowmap.capture import calls, state
from flowmap.capture.api import current_owner
from flowmap.seams import paths
from flowmap.seams.spec import ExtraHop, SeamSpec
from flowmap.seams.variants import Namer

if TYPE_CHECKING:
    from flowmap.capture.tracer import Tracer

MARKER = "__flowmap_seam__"


class _Plan:
    """A spec split once, at patch time, into what the call and the result each record."""

    __slots__ = (
        "spec", "arguments", "call_dims", "result_dims", "call_items", "result_items",
        "call_also", "result_also", "namer",
    )

    def __init__(self, spec: SeamSpec, fn: Callable[..., Any]) -> None:
        self.spec = spec
        self.arguments = calls.Arguments(fn)
        self.call_dims: dict[str, tuple[str, ...]] = {}
        self.result_dims: dict[str, tuple[str, ...]] = {}
        for path, dims in spec.dims.items():
            # both sides' leaves are named as the paths are: `batch.tokens`, `result.tokens`
            side = self.result_dims if paths.root(path) == "result" else self.call_dims
            side[path] = dims
        on_result = spec.items is not None and paths.split(spec.items)[0] == "result"
        self.call_items = None if on_result else spec.items
        self.result_items = spec.items if on_result else None
        self.call_also = tuple(h for h in spec.also if paths.split(h.payload)[0] != "result")
        self.result_also = tuple(h for h in spec.also if paths.split(h.payload)[0] == "result")
        self.namer = Namer() if spec.split_by else None

    def owner(self, bound: dict[str, Any] | None) -> str:
        """The callee's owner for this call: with `split_by`, an instance per what it was given."""
        if self.namer is None or bound is None:
            return self.spec.owner
        label = self.namer.label(self.spec.split_by, bound)
        return f"{self.spec.owner}/{label}" if label else self.spec.owner

    def payload(self, bound: dict[str, Any]) -> dict[str, Any]:
        """The call's payload, as `flowmap.seam` builds it: selected arguments by name."""
        return calls.payload(bound, self.spec.args)


# (caller, the call's arguments by name, the callee's owner for this call)
Entered = tuple[str, dict[str, Any] | None, str]


def wrap(fn: Callable[..., Any], spec: SeamSpec) -> Callable[..., Any]:
    """A wrapper of `fn` that records the seam `spec` while a trace is active."""
    plan = _Plan(spec, fn)
    _warn_unknown_args(plan)

    def enter(a: tuple[Any, ...], kw: dict[str, Any]) -> Entered:
        return _enter(plan, a, kw)

    def leave(entered: Entered, out: Any) -> None:
        _leave(plan, entered, out)

    owner_of = None if not spec.split_by else _owner_of
    wrapper = calls.wrap_call(fn, spec.owner, enter, leave, active=_tracing, owner_of=owner_of)
    setattr(wrapper, MARKER, spec.target)
    return wrapper


def missing_args(plan: _Plan) -> list[str]:
    """`args:` names the function has no parameter for (none when it takes `**kwargs`)."""
    sig = plan.arguments.sig
    if plan.spec.args is None or sig is None:
        return []
    params = sig.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return []
    names = {p.name for p in params}
    return [a for a in plan.spec.args if a not in names]


def _warn_unknown_args(plan: _Plan) -> None:
    """One line at patch time: a mistyped `args:` name would record an empty (0 B) seam."""
    missing = missing_args(plan)
    if not missing:
        return
    sig = plan.arguments.sig
    takes = ", ".join(p for p in (sig.parameters if sig else ()) if p not in calls.IMPLICIT)
    sys.stderr.write(
        f"flowmap: warning: seam-map target {plan.spec.target} has no argument "
        f"{', '.join(repr(m) for m in missing)} (it takes: {takes or 'nothing'}); "
        "those `args:` record nothing.\n")


def _owner_of(entered: Entered) -> str:
    return entered[2]


def _tracing() -> bool:
    return state.tracer is not None


def _enter(plan: _Plan, a: tuple[Any, ...], kw: dict[str, Any]) -> Entered:
    spec = plan.spec
    caller = spec.caller or current_owner()
    t = state.tracer
    if t is None:
        return caller, None, spec.owner
    try:
        bound = plan.arguments.bind(a, kw)
    except Exception as exc:  # arguments the signature rejects: the call itself will say so
        t.error(exc)
        return caller, None, spec.owner
    try:
        owner = plan.owner(bound)
    except Exception as exc:
        t.error(exc)
        owner = spec.owner
    if spec.step is not None:
        _set_step(t, bound, spec.step)
    if spec.call:
        items = _items(t, bound, plan.call_items)
        try:
            t.hop(src=caller, dst=owner, payload=plan.payload(bound), name=spec.name,
                  items=items, step=None, version=None, transport=spec.transport,
                  dims=plan.call_dims or None)
        except Exception as exc:
            t.error(exc)
    _extra_hops(t, bound, plan.call_also, spec.transport)
    return caller, bound, owner


def _leave(plan: _Plan, entered: Entered, out: Any) -> None:
    caller, bound, owner = entered
    spec = plan.spec
    t = state.tracer
    if t is None:
        return
    root = dict(bound or {})
    root["result"] = out
    if spec.result:
        items = _items(t, root, plan.result_items)
        try:
            t.hop(src=owner, dst=caller, payload=calls.reply(out), name=spec.result_name,
                  items=items, step=None, version=None, transport=spec.transport,
                  dims=plan.result_dims or None)
        except Exception as exc:
            t.error(exc)
    _extra_hops(t, root, plan.result_also, spec.transport)


def _items(t: Tracer, root: dict[str, Any], path: str | None) -> list[Any]:
    if path is None:
        return []
    try:
        return paths.item_ids(paths.resolve(root, path))
    except Exception as exc:
        t.error(exc)
        return []


def _set_step(t: Tracer, bound: dict[str, Any], path: str) -> None:
    try:
        value = paths.resolve(bound, path)
        # the program's own step, even one equal to a step counted from its optimizer: from
        # here on its steps are the ones that count
        if isinstance(value, int) and not isinstance(value, bool) and \
                (value != t.step or not t.explicit_steps):
            t.set_step(value)
    except Exception as exc:
        t.error(exc)


def _extra_hops(
    t: Tracer, root: dict[str, Any], hops: tuple[ExtraHop, ...], transport: str
) -> None:
    for h in hops:
        try:
            # named by the field it came from (`advantages`), not `(value)`; a path's last part
            leaf = paths.split(h.payload)[1][-1:] or [paths.split(h.payload)[0]]
            t.hop(src=h.src, dst=h.dst, payload={leaf[0]: paths.resolve(root, h.payload)}, name=h.name,
                  items=(), step=None, version=None, transport=transport, dims=None)
        except Exception as exc:
            t.error(exc)
