"""The callee side of flowmap[ray]: remote functions and actor classes that record their calls.

`flowmap.integrations.ray` swaps these in where `ray.remote` makes a remote
function or an actor class; they run in the worker, where the arguments and
results are real. The submitting side tells them who calls through one extra
keyword argument, `_flowmap_caller`: `(owner, {arg index or name: producer})`,
plus the `Dispatched` fields when an integration (verl) recorded the call
itself. A call without it did not come through Ray and records nothing.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from flowmap.capture import calls, state
from flowmap.capture.api import current_owner, set_process_owner
from flowmap.integrations import ray_node
from flowmap.seams import ray_targets

if TYPE_CHECKING:
    from flowmap.seams.plan import Plan

CALLER_KW = "_flowmap_caller"
OWNER_KW = "_flowmap_owner"
FLAG = "__flowmap_ray__"


class Dispatched(NamedTuple):
    """A call an integration already recorded on the submitting side."""

    owner: str  # the callee's owner for this call (`actor_rollout/0`)
    name: str  # the payload name of its result hop
    step: int | None  # the submitter's step, carried to the callee


def instrument_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A remote function's body that records its call and result; it runs as its own name."""
    arguments = calls.Arguments(fn)
    target = (fn.__module__, fn.__qualname__)  # its seam-map entry's key (`ray_targets`)

    def enter(a: tuple[Any, ...], kw: dict[str, Any]) -> _Call:
        return _Call(arguments, fn.__name__, fn.__name__, kw.pop(CALLER_KW, None), a, kw, target)

    task = calls.wrap_call(fn, None, enter, _Call.returned, owner_of=_Call.body_owner)
    _set_signature(task, inspect.signature(fn), CALLER_KW)
    setattr(task, FLAG, True)
    return task


def instrument_class(cls: type) -> type:
    """A subclass of `cls` whose methods record their calls; Ray pickles it by value."""
    members: dict[str, Any] = {}
    for name, fn in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith("__") or name.startswith("_ray"):
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, (staticmethod, classmethod)):
            continue
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            continue
        members[name] = _instrument_method(fn, name, (cls.__module__, f"{cls.__qualname__}.{name}"))
    members["__init__"] = _instrument_init(cls)
    members.update({
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
        FLAG: True,
    })
    return type(cls.__name__, (cls,), members)


def _instrument_init(cls: type) -> Callable[..., Any]:
    base_init = cls.__init__  # type: ignore[misc]
    own = base_init is not object.__init__
    arguments = calls.Arguments(base_init)  # `object.__init__`: the receiver only

    def __init__(self: Any, *a: Any, **kw: Any) -> None:
        caller = kw.pop(CALLER_KW, None)
        owner = kw.pop(OWNER_KW, None)
        if caller is None and owner is None:  # instantiated inside a process, not by Ray
            base_init(self, *a, **kw)
            return
        owner = owner or f"{cls.__name__}/0"
        set_process_owner(owner)  # one actor per worker process: its code runs as the actor
        call = _Call(arguments, owner, "__init__", caller, (self, *a), kw)
        base_init(self, *a, **kw)
        call.returned(None, record=False)

    if own:
        functools.update_wrapper(__init__, base_init)
        sig = inspect.signature(base_init)
    else:
        sig = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)])
    _set_signature(__init__, sig, CALLER_KW, OWNER_KW)
    return __init__


def _instrument_method(fn: Callable[..., Any], name: str,
                       target: tuple[str, str]) -> Callable[..., Any]:
    """An actor method that records its call (the receiver is bound, then left out)."""
    arguments = calls.Arguments(fn)

    def enter(a: tuple[Any, ...], kw: dict[str, Any]) -> _Call:
        return _Call(arguments, current_owner(), name, kw.pop(CALLER_KW, None), a, kw, target)

    method = calls.wrap_call(fn, None, enter, _Call.returned, owner_of=_Call.dispatched_owner)
    _set_signature(method, inspect.signature(fn), CALLER_KW)
    return method


def _set_signature(wrapper: Callable[..., Any], sig: inspect.Signature, *names: str) -> None:
    """Give `wrapper` the signature Ray must validate calls against: the user's plus ours.

    Ray unwraps `__wrapped__` before reading a method's signature, so the link
    that `functools.wraps` leaves is removed; `__signature__` then rules.
    """
    wrapper.__signature__ = _with_params(sig, *names)  # type: ignore[attr-defined]
    wrapper.__dict__.pop("__wrapped__", None)


def _with_params(sig: inspect.Signature, *names: str) -> inspect.Signature:
    """`sig` plus optional keyword-only parameters, placed before any `**kwargs`."""
    params = list(sig.parameters.values())
    tail = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    head = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in names
             if n not in sig.parameters]
    return sig.replace(parameters=head + extra + tail)


class _Call:
    """One task or method execution in a worker: records the call, then the result.

    A call without `_flowmap_caller` did not come through Ray (an actor calling
    its own method, a class built inside an actor): it records nothing.
    """

    __slots__ = ("owner", "name", "caller", "dispatched")

    def __init__(self, arguments: calls.Arguments, owner: str, name: str, caller: Any,
                 a: tuple[Any, ...], kw: dict[str, Any],
                 target: tuple[str, str] | None = None) -> None:
        self.owner = owner
        self.name = name
        self.dispatched: Dispatched | None = None
        if caller is None:
            self.caller: str | None = None
            return
        caller_owner, ref_producers, done, named = _caller_info(caller)
        self.caller = caller_owner
        claim = None
        if named is not None:  # a seam map's words for this target (`ray_targets`)
            self.owner, self.name = named[0] or self.owner, named[1] or self.name
            claim = ray_targets.in_worker(*target) if target is not None else None
        t = state.tracer
        if done is not None:
            self.dispatched = done
            self.owner, self.name = done.owner, done.name
            if t is not None and done.step is not None and done.step != t.step:
                t.set_step(done.step)
        if t is None:
            return
        ray_node.here(self.owner)
        try:
            bound = arguments.bind(a, kw)
            inline, by_producer = _split_arguments(bound, ref_producers)
            if claim is not None:
                self._mapped(t, claim.plan, bound, inline, by_producer, done is None)
                return
            for producer, payload in sorted(by_producer.items()):
                self._hop(t, producer, self.owner, payload, "shm")
            if done is None:  # a dispatched call's inline arguments were recorded by the submitter
                self._hop(t, self.caller, self.owner, inline, "rpc")
        except Exception as exc:
            t.error(exc)

    def _mapped(self, t: Any, plan: Plan, bound: dict[str, Any], inline: dict[str, Any],
                by_producer: dict[str, dict[str, Any]], with_inline: bool) -> None:
        """The call as its seam-map entry says, through the code a wrapped target records
        with: the arguments `args` selects (each where it came from: inline, or by ref
        from its producer), their `dims`, the `items` on the hop that carries them, the
        `step`, and the `also` hops of the arguments."""
        import flowmap.seams.plan as seam_plan  # loaded with the map that made `plan`

        spec = plan.spec
        if spec.step is not None:
            seam_plan.set_step(t, bound, spec.step)
        if spec.call:
            selected = plan.payload(bound)
            items_at = plan.items_root()
            for producer, sent in sorted(by_producer.items()):
                payload = {k: v for k, v in sent.items() if k in selected}
                if payload:
                    seam_plan.call_hop(t, plan, producer, self.owner, payload,
                                       bound if items_at in payload else None, "shm")
            if with_inline:
                by_ref = {k for sent in by_producer.values() for k in sent}
                payload = {k: v for k, v in inline.items() if k in selected}
                seam_plan.call_hop(t, plan, spec.caller or str(self.caller), self.owner, payload,
                                   None if items_at in by_ref else bound, "rpc")
        seam_plan.extra_hops(t, bound, plan.call_also, "rpc")

    def body_owner(self) -> str:
        """A task's body runs as the task (or the role an integration dispatched it to)."""
        return self.owner

    def dispatched_owner(self) -> str | None:
        """A method's body runs as its actor, or as the role it was dispatched to (several
        roles may share one process)."""
        return self.owner if self.dispatched is not None else None

    def _hop(self, t: Any, src: str, dst: str, payload: Any, transport: str) -> None:
        t.hop(src=src, dst=dst, payload=payload, name=self.name, items=(), step=None,
              version=None, transport=transport, dims=None)

    def returned(self, out: Any, record: bool = True) -> None:
        """Flush this worker's hops; record the result only for a dispatched call.

        A plain Ray call's result is recorded where its ref is resolved (the
        submitter's `ray.get`, `flowmap.integrations.ray`): the caller may
        never fetch it, only hand the ref on. An integration that dispatched
        the call (verl) had it recorded here, where the result is real.
        """
        t = state.tracer
        if t is None or self.caller is None:
            return
        try:
            if record and self.dispatched is not None:
                self._hop(t, self.owner, self.caller, calls.reply(out), "rpc")
            # Ray may end this worker with SIGKILL right after the driver's
            # ray.get: put the hops on disk before the result is handed back.
            t.flush()
        except Exception as exc:
            t.error(exc)


def _caller_info(
    caller: Any,
) -> tuple[str, dict[Any, str], Dispatched | None, tuple[str, str] | None]:
    """`_flowmap_caller` is `(owner, {arg index or name: producer}[, Dispatched fields
    or None[, (owner, call name) from a seam map]])`."""
    if isinstance(caller, (tuple, list)) and len(caller) in (2, 3, 4):
        done = Dispatched(*caller[2]) if len(caller) >= 3 and caller[2] else None
        named = (str(caller[3][0]), str(caller[3][1])) if len(caller) == 4 and caller[3] else None
        return str(caller[0]), dict(caller[1] or {}), done, named
    return (str(caller) if caller else "driver"), {}, None, None


def _split_arguments(
    bound: dict[str, Any], ref_producers: dict[Any, str]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Arguments by name: those passed inline, and those passed as refs, by producer."""
    inline = calls.payload(bound)
    if not ref_producers:
        return inline, {}
    names = list(inline)
    by_producer: dict[str, dict[str, Any]] = {}
    for key, producer in ref_producers.items():
        # Positions count the caller's arguments, which exclude `self`.
        name = names[key] if isinstance(key, int) and key < len(names) else key
        if name in inline:
            by_producer.setdefault(producer, {})[name] = inline.pop(name)
    return inline, by_producer
