"""The public capture API: `hop`, `owner`, `seam`, `counter`, `mark`, `drop`, `step`.

Every function starts with one check of `state.tracer`; when nothing is
tracing that is all it costs. When tracing, failures inside flowmap are
counted by the tracer and swallowed: instrumentation must never change what
the user's program does.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from flowmap.capture import calls, forksafe, state, values

if TYPE_CHECKING:
    from flowmap.capture.tracer import Tracer

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def hop(
    src: str,
    dst: str,
    payload: Any,
    *,
    name: str | None = None,
    items: Iterable[Any] = (),
    step: int | None = None,
    version: int | None = None,
    transport: str = "ref",
    dims: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Record one crossing of the seam `src -> dst` carrying `payload`.

    `items` are ids of the logical units on board (trajectory ids, uids), which
    give lifetimes; `dims` names the dimensions of tensor leaves by path, e.g.
    `{"routed_experts": ("tokens", "layers", "topk")}`, so sizes can be
    projected to production scale.
    """
    t = state.tracer
    if t is None:
        return
    try:
        t.hop(  # positional: keywords cost a dict per call on this hot path
            src, dst, payload, name if name is not None else type(payload).__name__,
            items, step, version, transport,
            {k: tuple(v) for k, v in dims.items()} if dims else None,
        )
        state.hopped(payload)
        if transport != "ref":  # bytes moved: what a view or a mask adds (`leaf_notes`)
            note(src, dst, name if name is not None else type(payload).__name__, payload,
                 step, transport)
    except Exception as exc:
        t.error(exc)


def _declared_tracer() -> Tracer | None:
    """The tracer, once the watch of `flowmap trace` with no map was told the program is
    instrumented (it tells its own story: no seams are looked for)."""
    if state.on_declared is not None:
        state.declared()
    return state.tracer


def note(src: Any, dst: Any, name: Any, payload: Any, step: int | None, transport: Any) -> None:
    """Record the leaf notes of a hop that moved `payload` (storage behind views, mask counts)."""
    from flowmap.capture import leaf_notes  # here: most hops are `ref`, most programs never pay

    t = state.tracer
    if t is None or not all(type(s) is str for s in (src, dst, name, transport)):
        return
    found = leaf_notes.collect(payload, transport, values.enabled())
    if found:
        t.notes(src, dst, name, transport, step, found)
    if values.enabled():  # `trace --values` only: reads data on sampled hops
        t.values(src, dst, name, transport, step, payload)


def counter(name: str, value: float) -> None:
    """Record one sample of the time series `name` (in-flight, watermark, loss...)."""
    t = _declared_tracer()
    if t is None:
        return
    try:
        t.counter(current_owner(), name, float(value))
    except Exception as exc:
        t.error(exc)


def mark(name: str) -> None:
    """Record a phase marker (`weight_sync.begin`, `train.step`...)."""
    t = _declared_tracer()
    if t is None:
        return
    try:
        t.mark(current_owner(), name)
    except Exception as exc:
        t.error(exc)


def drop(items: Iterable[Any], reason: str) -> None:
    """Record that `items` were discarded by the current owner (e.g. `reason="stale"`)."""
    t = _declared_tracer()
    if t is None:
        return
    try:
        t.drop(current_owner(), items, reason)
    except Exception as exc:
        t.error(exc)


def tag_items(obj: T, items: Iterable[Any]) -> T:
    """Name the items riding on `obj` for the transport that sends it next; returns `obj`.

    For messages recorded by the transport hooks (a `multiprocessing` queue's
    `put`, a pipe's `send`, a ZMQ `send_pyobj`), which cannot know the
    program's item ids: `q.put(flowmap.tag_items(traj, [traj.uid]))`. The send
    carries them, so a later `flowmap.drop` of those items counts their bytes.
    """
    t = _declared_tracer()
    if t is None:
        return obj
    try:
        from flowmap.capture import item_tags
        from flowmap.capture.names import NOT_READ, items_list

        got = items_list(items)
        if got is not NOT_READ and got:
            item_tags.put(obj, list(got))
    except Exception as exc:
        t.error(exc)
    return obj


def step(n: int) -> None:
    """Set the training step that later hops of this process belong to."""
    t = _declared_tracer()
    if t is None:
        return
    try:
        t.set_step(int(n))
    except Exception as exc:
        t.error(exc)


def current_owner() -> str:
    """The owner of the running code: the innermost `owner()` block, else the process default."""
    return state.current_owner.get() or state.default_owner


def set_owner(name: str) -> None:
    """Set the default owner of this process (for worker processes such as DP ranks); called
    in a thread other than the main one, or in an asyncio task the program started (not its
    `main` coroutine, which is the program itself), that thread's or task's owner: a
    framework that runs a role as a thread or a task (an engine's scheduler, a server's
    tokenizer manager, an agent loop) names it so, and the process's other roles keep
    theirs. Tasks the task starts afterwards inherit it, as they inherit its context."""
    if threading.current_thread() is threading.main_thread() and not _in_task():
        set_process_owner(name)
        return
    if state.on_declared is not None:  # instrumented: `trace` with no map looks no further
        state.declared()
    state.current_owner.set(name)  # this thread's context only
    _say_owner(name)


def _in_task() -> bool:
    """Whether an asyncio task of the program's other than its `main` coroutine runs now."""
    aio = sys.modules.get("asyncio")
    if aio is None:
        return False
    try:
        task = aio.current_task() if aio._get_running_loop() is not None else None
        return task is not None and getattr(task.get_coro(), "__name__", "main") != "main"
    except (AttributeError, RuntimeError):
        return False


def set_process_owner(name: str) -> None:
    """Set the default owner of this process, from any thread (a Ray actor's `__init__`).

    The shard says so once (an `i owner` event): the owner's pid and host are this
    process's, whichever process records its hops."""
    if state.on_declared is not None:  # instrumented: `trace` with no map looks no further
        state.declared()
    state.default_owner = name
    state.auto_owner = False
    _say_owner(name)


def _say_owner(name: str) -> None:
    t = state.tracer
    if t is not None and (id(t), name) not in _declared and len(_declared) < 256:
        _declared.add((id(t), name))  # once per shard: a second run's shard says it again
        info = getattr(t, "info", None)  # not a stand-in's no-op: a fork's shard opens here
        if info is not None:
            info("owner", str(name))


_declared: set[tuple[int, str]] = set()  # (tracer, owner) this process said it runs
forksafe.at_fork(after_in_child=_declared.clear)


class owner:
    """Set the current owner for a block (`with owner("driver"):`) or a function (`@owner("driver")`).

    Context-variable based: each thread and asyncio task keeps its own owner.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        if state.on_declared is not None:  # instrumented: `trace` with no map looks no further
            state.declared()
        self._tokens: list[Any] = []

    def __enter__(self) -> owner:
        self._tokens.append((state.current_owner.set(self.name), state.owner_runs(self.name)))
        return self

    def __exit__(self, *exc: object) -> None:
        token, started = self._tokens.pop()
        state.current_owner.reset(token)
        state.owner_ran(self.name, started)

    def __call__(self, fn: F) -> F:
        import inspect  # here, not at the top: `flowmap` is imported at every traced child's start-up

        name = self.name
        if inspect.isgeneratorfunction(fn):
            return _owned_generator(fn, name)  # type: ignore[return-value]
        if inspect.isasyncgenfunction(fn):
            return _owned_async_generator(fn, name)  # type: ignore[return-value]
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                token, started = state.current_owner.set(name), state.owner_runs(name)
                try:
                    out = await fn(*args, **kwargs)
                    state.owner_made(name, out)
                    return out
                finally:
                    state.current_owner.reset(token)
                    state.owner_ran(name, started)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            token, started = state.current_owner.set(name), state.owner_runs(name)
            try:
                out = fn(*args, **kwargs)
                state.owner_made(name, out)  # what it returns, no hop carried yet, it made
                return out
            finally:
                state.current_owner.reset(token)
                state.owner_ran(name, started)

        return wrapper  # type: ignore[return-value]


def _owned_generator(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A generator's body runs as `name` each time it is resumed, and its caller's owner is
    back at each `yield`: the loop that drives a decorated loader runs as itself."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        inner, block = fn(*args, **kwargs), owner(name)
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                with block:
                    out = inner.send(sent) if thrown is None else inner.throw(thrown)
                    state.owner_made(name, out)
            except StopIteration as stop:
                return stop.value
            try:
                sent, thrown = (yield out), None
            except GeneratorExit:
                with block:
                    inner.close()
                raise
            except BaseException as exc:  # thrown in by the caller: on into the body
                sent, thrown = None, exc

    return wrapper


def _owned_async_generator(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`_owned_generator` for an `async def` with `yield`: the body runs as `name` at each
    `asend`, the consumer's code as itself."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        inner, block = fn(*args, **kwargs), owner(name)
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                with block:
                    out = await (inner.asend(sent) if thrown is None else inner.athrow(thrown))
                    state.owner_made(name, out)
            except StopAsyncIteration:
                return
            try:
                sent, thrown = (yield out), None
            except GeneratorExit:
                with block:
                    await inner.aclose()
                raise
            except BaseException as exc:
                sent, thrown = None, exc

    return wrapper


def seam(
    owner: str,
    *,
    name: str | None = None,
    args: Sequence[str] | None = None,
    result: bool = True,
) -> Callable[[F], F]:
    """Turn a function into a seam: a call is a hop `<caller> -> owner` of its arguments,
    its return value a hop `owner -> <caller>`; the body runs as `owner`.

    `args` selects the arguments that make the payload (default: all but
    `self`/`cls`); `result=False` records the call only.
    """

    def decorate(fn: F) -> F:
        if state.on_declared is not None:
            state.declared()
        label = name or fn.__name__
        arguments = calls.Arguments(fn)
        selected = tuple(args) if args is not None else None

        def enter(a: tuple[Any, ...], kw: dict[str, Any]) -> str:
            caller = current_owner()
            t = state.tracer
            if t is not None:
                try:
                    t.hop(src=caller, dst=owner, payload=calls.payload(arguments.bind(a, kw), selected),
                          name=label, items=(), step=None, version=None, transport="ref",
                          dims=None)
                except Exception as exc:
                    t.error(exc)
            return caller

        def leave(caller: str, out: Any) -> None:
            t = state.tracer
            if t is not None and result:
                try:
                    t.hop(src=owner, dst=caller, payload=calls.reply(out), name=label, items=(), step=None,
                          version=None, transport="ref", dims=None)
                except Exception as exc:
                    t.error(exc)

        return cast(F, calls.wrap_call(fn, owner, enter, leave))

    return decorate
