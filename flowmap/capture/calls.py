"""Binding a traced call's arguments, and wrapping a call, once for every way a seam is declared.

The decorator API (`flowmap.seam`), seam maps (`flowmap.seams.wrapper`) and
the integrations (`flowmap.integrations.ray`) all record a call the same way:
the arguments by parameter name make the payload (`self`/`cls` left out), the
body runs as the seam's owner, the return value is the reply. This module
holds that shape: `Arguments` binds (the signature is read once, at wrap
time), `wrap_call` wraps a sync or async function around an `enter` and a
`leave` hook. The hooks are the caller's: what they record is theirs, and
they must not raise (capture never raises into the user's program); the
user's function always runs with its own arguments and its exceptions pass
through untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from flowmap.capture import state

if TYPE_CHECKING:
    import inspect

S = TypeVar("S")
IMPLICIT = ("self", "cls")  # the receiver is not part of what a call sends
RESULT = "result"  # the root of a reply's leaf paths


class Arguments:
    """The parameter names of one function, to bind each call's arguments to."""

    __slots__ = ("sig", "names")

    def __init__(self, fn: Callable[..., Any]) -> None:
        import inspect  # here, not at the top: `flowmap` is imported at every traced child's start-up

        try:
            self.sig: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):  # builtins and C functions may have none
            self.sig = None
        # Parameters that are all plain (positional or keyword): a positional call binds by
        # zip, without `Signature.bind_partial`'s walk (most of a small seam's cost)
        plain = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = self.sig.parameters.values() if self.sig is not None else ()
        self.names: tuple[str, ...] | None = (
            tuple(p.name for p in params) if self.sig is not None and
            all(p.kind is plain for p in params) else None)

    def bind(self, a: tuple[Any, ...], kw: Mapping[str, Any]) -> dict[str, Any]:
        """`{name: value}` of a call; `arg0, arg1, ...` when there is no signature.

        Raises TypeError when the signature rejects the arguments (the call itself will say so).
        """
        names = self.names
        if names is not None and not kw and len(a) <= len(names):
            return dict(zip(names, a))
        if self.sig is None:
            bound: dict[str, Any] = {f"arg{i}": v for i, v in enumerate(a)}
            bound.update(kw)
            return bound
        return dict(self.sig.bind_partial(*a, **kw).arguments)


def payload(bound: Mapping[str, Any], selected: Collection[str] | None = None) -> dict[str, Any]:
    """What a call sends: the `selected` arguments by name, or all but `self`/`cls`."""
    if selected is not None:
        return {k: bound[k] for k in selected if k in bound}
    return {k: v for k, v in bound.items() if k not in IMPLICIT}


def reply(out: Any) -> dict[str, Any]:
    """What a call returns, as its reply hop's payload: `{"result": out}`.

    The call's leaves are named by argument (`batch.tokens`) and the reply's
    by `result` (`result.tokens`, `result` for a returned tensor), the same
    paths a seam map's `dims`, `items` and `also` use: one name per leaf on
    both sides, whichever way the seam was declared.
    """
    return {RESULT: out}


def wrap_call(
    fn: Callable[..., Any],
    owner: str | None,
    enter: Callable[[tuple[Any, ...], dict[str, Any]], S],
    leave: Callable[[S, Any], None],
    *,
    active: Callable[[], bool] | None = None,
    owner_of: Callable[[S], str | None] | None = None,
) -> Callable[..., Any]:
    """`fn` (sync or async) wrapped: `enter(args, kwargs)`, the body as `owner`, `leave(entered, result)`.

    `owner=None` keeps the caller's owner (a method of an actor that is
    already its owner). `owner_of(entered)`, when given, names the owner per
    call instead (a Ray call tells its callee which role it runs as; None
    keeps the caller's). `enter` may take keyword arguments out of `kwargs`
    (a caller tag an integration added) before `fn` sees them. With `active`,
    a call made while it returns False runs `fn` untouched (no hook, no
    owner): a seam map costs nothing outside a trace. `leave` is not called
    when `fn` raises.
    """
    import inspect

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*a: Any, **kw: Any) -> Any:
            if active is not None and not active():
                return await fn(*a, **kw)
            entered = enter(a, kw)
            who = owner if owner_of is None else owner_of(entered)
            token = state.current_owner.set(who) if who is not None else None
            started = state.owner_runs(who)
            try:
                out = await fn(*a, **kw)
            finally:
                if token is not None:
                    state.current_owner.reset(token)
                    state.owner_ran(who, started)
            leave(entered, out)
            return out

        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        if active is not None and not active():
            return fn(*a, **kw)
        entered = enter(a, kw)
        who = owner if owner_of is None else owner_of(entered)
        token = state.current_owner.set(who) if who is not None else None
        started = state.owner_runs(who)
        try:
            out = fn(*a, **kw)
        finally:
            if token is not None:
                state.current_owner.reset(token)
                state.owner_ran(who, started)
        leave(entered, out)
        return out

    return wrapper
