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

import contextlib
import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

from flowmap.capture import calls, state
from flowmap.seams.plan import Plan, call_hop, extra_hops, result_hop, set_step
from flowmap.seams.spec import SeamSpec

MARKER = "__flowmap_seam__"

# (owner, result name, result, the caller it was handed to) -> None. An integration that
# follows results further (`flowmap.integrations.autograd_flow`) registers here, so seam
# maps sit below the integrations and never import them.
ResultWatcher = Callable[[str, str, object, str], None]
_result_watchers: list[ResultWatcher] = []


def watch_results(watcher: ResultWatcher) -> None:
    """Call `watcher` with every later result a seam-map target returns (once per watcher)."""
    if watcher not in _result_watchers:
        _result_watchers.append(watcher)


class _Plan(Plan):
    """The entry's `Plan`, with the wrapped function's parameters to bind each call to."""

    __slots__ = ("arguments", "binds", "roots")

    def __init__(self, spec: SeamSpec, fn: Callable[..., Any]) -> None:
        super().__init__(spec)
        self.arguments = calls.Arguments(fn)
        # Whether a call reads its arguments by name at all: a seam that records its result
        # alone (`call: false`: an environment's `step(action)`) binds nothing per call.
        self.binds = bool(spec.call or spec.step is not None or self.namer is not None
                          or self.call_also or self.result_items or self.result_also)
        # Whether the result's hops read paths under the arguments and `result` (item ids,
        # `also`): only then is that dict built per call.
        self.roots = bool(self.result_items or self.result_also)


# (caller, the call's arguments by name, the callee's owner for this call)
Entered = tuple[str, dict[str, Any] | None, str]


def wrap(fn: Callable[..., Any], spec: SeamSpec) -> Callable[..., Any]:
    """A wrapper of `fn` that records the seam `spec` while a trace is active."""
    plan = _Plan(spec, fn)
    _warn_unknown_args(plan)
    # partials, not closures: a seam called once per environment step pays a frame less each
    enter: Callable[[tuple[Any, ...], dict[str, Any]], Entered] = functools.partial(_enter, plan)
    leave: Callable[[Entered, Any], None] = functools.partial(_leave, plan)
    target = spec.target

    def active() -> bool:
        if _held_until is not None and not _open(target):
            return False
        return state.tracer is not None

    owner_of = None if not spec.split_by else _owner_of
    wrapper = calls.wrap_call(fn, spec.owner, enter, leave, active=active, owner_of=owner_of)
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


# While set, seams record nothing until this target is called: a map applied in the middle
# of a training iteration (`flowmap.discover.auto`) starts recording where one begins, so
# the stages are first reached in the order the script runs them.
_held_until: str | None = None
_on_open: Callable[[], None] | None = None  # called once, as the recording opens


def hold_until(target: str | None, on_open: Callable[[], None] | None = None) -> None:
    """Record no seam until `target` is called (None: record from now on); `on_open` (or
    the one given before) is called as the recording opens (now, for None)."""
    global _held_until, _on_open
    _held_until = target
    if on_open is not None:
        _on_open = on_open
    if target is None:
        _opened()


def held() -> bool:
    return _held_until is not None


def _open(target: str) -> bool:
    global _held_until
    if target != _held_until:
        return False
    _held_until = None
    _opened()
    return True


def _opened() -> None:
    global _on_open
    call, _on_open = _on_open, None
    with contextlib.suppress(Exception):  # never into the program: its call goes on, recorded
        if call is not None:
            call()


def _owner_of(entered: Entered) -> str:
    return entered[2]


def _enter(plan: _Plan, a: tuple[Any, ...], kw: dict[str, Any]) -> Entered:
    spec = plan.spec
    caller = spec.caller or state.current_owner.get() or state.default_owner  # current_owner()
    t = state.tracer
    if t is None or not plan.binds:
        return caller, None, spec.owner
    try:
        bound = plan.arguments.bind(a, kw)
    except Exception as exc:  # arguments the signature rejects: the call itself will say so
        t.error(exc)
        return caller, None, spec.owner
    owner = spec.owner
    if plan.namer is not None:
        try:
            owner = plan.owner(bound)
        except Exception as exc:
            t.error(exc)
    if spec.step is not None:
        set_step(t, bound, spec.step)
    if spec.call:
        call_hop(t, plan, caller, owner, plan.payload(bound), bound, spec.transport)
    if plan.call_also:
        extra_hops(t, bound, plan.call_also, spec.transport)
    return caller, bound, owner


def _leave(plan: _Plan, entered: Entered, out: Any) -> None:
    caller, bound, owner = entered
    spec = plan.spec
    t = state.tracer
    if t is None:
        return
    root = None
    if plan.roots:
        root = dict(bound or {})
        root["result"] = out
    if spec.result:
        result_hop(t, plan, owner, caller, out, root, spec.transport)
        for watcher in _result_watchers:
            try:
                watcher(owner, spec.result_name, out, caller)
            except Exception as exc:
                t.error(exc)
    if root is not None and plan.result_also:
        extra_hops(t, root, plan.result_also, spec.transport)
