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

import functools
import inspect
from collections.abc import Callable
from typing import Any

from flowmap.capture import state
from flowmap.capture.api import current_owner
from flowmap.seams import paths
from flowmap.seams.spec import ExtraHop, SeamSpec

MARKER = "__flowmap_seam__"


class _Plan:
    """A spec split once, at patch time, into what the call and the result each record."""

    __slots__ = (
        "spec", "sig", "call_dims", "result_dims", "call_items", "result_items",
        "call_also", "result_also",
    )

    def __init__(self, spec: SeamSpec, fn: Callable[..., Any]) -> None:
        self.spec = spec
        try:
            self.sig: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self.sig = None
        self.call_dims: dict[str, tuple[str, ...]] = {}
        self.result_dims: dict[str, tuple[str, ...]] = {}
        for path, dims in spec.dims.items():
            head, rest = paths.split(path)
            if head == "result":
                self.result_dims[".".join(rest)] = dims
            else:
                self.call_dims[path] = dims
        on_result = spec.items is not None and paths.split(spec.items)[0] == "result"
        self.call_items = None if on_result else spec.items
        self.result_items = spec.items if on_result else None
        self.call_also = tuple(h for h in spec.also if paths.split(h.payload)[0] != "result")
        self.result_also = tuple(h for h in spec.also if paths.split(h.payload)[0] == "result")

    def bind(self, a: tuple, kw: dict) -> dict[str, Any]:
        if self.sig is None:
            bound: dict[str, Any] = {f"arg{i}": v for i, v in enumerate(a)}
            bound.update(kw)
            return bound
        return dict(self.sig.bind_partial(*a, **kw).arguments)

    def payload(self, bound: dict[str, Any]) -> dict[str, Any]:
        """The call's payload, as `flowmap.seam` builds it: selected arguments by name."""
        if self.spec.args is not None:
            return {k: bound[k] for k in self.spec.args if k in bound}
        return {k: v for k, v in bound.items() if k not in ("self", "cls")}


def wrap(fn: Callable[..., Any], spec: SeamSpec) -> Callable[..., Any]:
    """A wrapper of `fn` that records the seam `spec` while a trace is active."""
    plan = _Plan(spec, fn)
    owner = spec.owner

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*a: Any, **kw: Any) -> Any:
            if state.tracer is None:
                return await fn(*a, **kw)
            caller, bound = _enter(plan, a, kw)
            token = state.current_owner.set(owner)
            try:
                out = await fn(*a, **kw)
            finally:
                state.current_owner.reset(token)
            _leave(plan, caller, bound, out)
            return out

        setattr(async_wrapper, MARKER, spec.target)
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        if state.tracer is None:
            return fn(*a, **kw)
        caller, bound = _enter(plan, a, kw)
        token = state.current_owner.set(owner)
        try:
            out = fn(*a, **kw)
        finally:
            state.current_owner.reset(token)
        _leave(plan, caller, bound, out)
        return out

    setattr(wrapper, MARKER, spec.target)
    return wrapper


def _enter(plan: _Plan, a: tuple, kw: dict) -> tuple[str, dict[str, Any] | None]:
    spec = plan.spec
    caller = spec.caller or current_owner()
    t = state.tracer
    if t is None:
        return caller, None
    try:
        bound = plan.bind(a, kw)
    except Exception as exc:  # arguments the signature rejects: the call itself will say so
        t.error(exc)
        return caller, None
    if spec.step is not None:
        _set_step(t, bound, spec.step)
    if spec.call:
        items = _items(t, bound, plan.call_items)
        try:
            t.hop(caller, spec.owner, plan.payload(bound), spec.name, items, None, None,
                  spec.transport, plan.call_dims or None)
        except Exception as exc:
            t.error(exc)
    _extra_hops(t, bound, plan.call_also, spec.transport)
    return caller, bound


def _leave(plan: _Plan, caller: str, bound: dict[str, Any] | None, out: Any) -> None:
    spec = plan.spec
    t = state.tracer
    if t is None:
        return
    root = dict(bound or {})
    root["result"] = out
    if spec.result:
        items = _items(t, root, plan.result_items)
        try:
            t.hop(spec.owner, caller, out, spec.result_name, items, None, None,
                  spec.transport, plan.result_dims or None)
        except Exception as exc:
            t.error(exc)
    _extra_hops(t, root, plan.result_also, spec.transport)


def _items(t: Any, root: dict[str, Any], path: str | None) -> list[Any]:
    if path is None:
        return []
    try:
        return paths.item_ids(paths.resolve(root, path))
    except Exception as exc:
        t.error(exc)
        return []


def _set_step(t: Any, bound: dict[str, Any], path: str) -> None:
    try:
        value = paths.resolve(bound, path)
        if isinstance(value, int) and not isinstance(value, bool) and value != t.step:
            t.set_step(value)
    except Exception as exc:
        t.error(exc)


def _extra_hops(
    t: Any, root: dict[str, Any], hops: tuple[ExtraHop, ...], transport: str
) -> None:
    for h in hops:
        try:
            t.hop(h.src, h.dst, paths.resolve(root, h.payload), h.name, (), None, None,
                  transport, None)
        except Exception as exc:
            t.error(exc)
