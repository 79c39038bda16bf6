"""flowmap[ray]: trace a Ray job across its driver, tasks and actors.

How tracing reaches the workers: `ray.init` is wrapped so the job's runtime
environment carries `FLOWMAP_RUN_DIR`, the boot directory on `PYTHONPATH`
and the seam maps (`runtime_env()`); every worker process then starts its
own shard in the run, like any traced child. Ray's own service processes are
started with those variables removed, so they leave no empty shards.

What is recorded, once per crossing, on the side that has the real values:
- a task or actor-method call is a hop `<caller> -> <callee>` (transport
  `rpc`) whose payload is the arguments passed inline, as the callee received
  them; arguments passed as object refs are hops `<producer> -> <callee>`
  (transport `shm`) with the bytes the callee received, where the producer is
  the task or actor whose call returned the ref (`object_store` for `ray.put`
  refs and refs of unknown origin) — so a ref handed from one actor to another
  through the driver shows up as the direct edge it is;
- its return value is a hop `<callee> -> <caller>` (transport `rpc`);
- owners: a task is named by its function (`score`), an actor by its class
  and creation index in the creating process (`Learner/0`), or by its Ray
  name when it has one; code in an actor runs as that owner;
- `ray.put(value)` is a hop `<owner> -> object_store : put` (transport `shm`).

The callee learns its caller, and the producers of its ref arguments, through
one extra keyword argument (`_flowmap_caller`) that the submitting side adds
and the callee's wrapper removes before the user's function sees its
arguments; remote functions and
actor classes are wrapped when `ray.remote` makes them. All of this uses
Ray's private API of the pinned version and fails soft: anything unexpected
leaves Ray untouched and counts an error.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from flowmap.capture import state
from flowmap.capture.api import current_owner, set_owner
from flowmap.capture.session import restore_environ

CALLER_KW = "_flowmap_caller"
OWNER_KW = "_flowmap_owner"
FLAG = "__flowmap_ray__"
OBJECT_STORE = "object_store"
_FLOWMAP_VARS = ("FLOWMAP_RUN_DIR", "FLOWMAP_IMPORT_ROOT", "FLOWMAP_SEAMS")

_install_lock = threading.Lock()
_installed = False
_actor_counts: dict[str, itertools.count] = {}
# Who produced each object ref this process handed out (ref hex -> owner),
# and the owner name of each actor it created (actor id hex -> owner); bounded.
MAX_REMEMBERED_REFS = 100_000
_producers: dict[str, str] = {}
_actor_owners: dict[str, str] = {}


def runtime_env(run_dir: str | None = None, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Ray runtime environment whose workers trace into `run_dir` (default: this run).

    Pass it to `ray.init(runtime_env=...)` or `ray job submit --runtime-env-json`
    when the driver is not started by `flowmap trace`; `base` is merged in.
    """
    from flowmap.capture import session

    run_dir = run_dir or os.environ.get(session.ENV_RUN_DIR) or _tracer_run_dir()
    if not run_dir:
        raise RuntimeError("no flowmap run to trace into: pass run_dir or run under flowmap trace")
    env = session.child_environment(run_dir, {"PYTHONPATH": _pythonpath_without_boot()})
    vars_ = {k: env[k] for k in ("FLOWMAP_RUN_DIR", "FLOWMAP_IMPORT_ROOT", "PYTHONPATH")}
    for name in ("FLOWMAP_SEAMS", "FLOWMAP_TRANSPORTS"):  # workers obey the driver's switches
        if os.environ.get(name):
            vars_[name] = os.environ[name]
    out = dict(base or {})
    user_vars = dict(out.get("env_vars") or {})
    if user_vars.get("PYTHONPATH"):
        vars_["PYTHONPATH"] = os.pathsep.join([vars_["PYTHONPATH"], user_vars["PYTHONPATH"]])
    out["env_vars"] = {**user_vars, **vars_}
    return out


def install() -> None:
    """Wrap Ray's entry points in this process (idempotent)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        _installed = True
    import ray
    import ray._private.worker as worker
    import ray.actor as actor
    import ray.remote_function as remote_function

    needed = [(worker, "_make_remote"), (ray, "init"), (ray, "put"), (ray, "ObjectRef"),
              (remote_function.RemoteFunction, "_remote"), (actor.ActorClass, "_remote"),
              (actor.ActorHandle, "_actor_method_call")]
    missing = [f"{getattr(o, '__name__', o)}.{a}" for o, a in needed if not hasattr(o, a)]
    if missing:
        sys.stderr.write(f"flowmap: this Ray ({getattr(ray, '__version__', '?')}) lacks "
                         f"{', '.join(missing)}; Ray calls are not traced (flowmap[ray] "
                         "pins the version it supports).\n")
        return
    worker._make_remote = _wrap_make_remote(worker._make_remote)
    ray.init = _wrap_init(ray.init)
    ray.put = _wrap_put(ray.put)
    # Patching Ray's classes at run time is the point of this module.
    remote_function.RemoteFunction._remote = _wrap_submit(  # type: ignore[method-assign]
        remote_function.RemoteFunction._remote, _function_is_ours
    )
    actor.ActorClass._remote = _wrap_create(actor.ActorClass._remote)  # type: ignore[method-assign]
    actor.ActorHandle._actor_method_call = _wrap_method_call(  # type: ignore[method-assign]
        actor.ActorHandle._actor_method_call)


# -- driver side: start-up ----------------------------------------------------
def _wrap_init(init: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(init)
    def flowmap_init(*args: Any, **kwargs: Any) -> Any:
        try:
            traced = bool(os.environ.get("FLOWMAP_RUN_DIR") or _tracer_run_dir())
            if traced:
                kwargs["runtime_env"] = runtime_env(base=_as_dict(kwargs.get("runtime_env")))
                if state.default_owner == "main":
                    set_owner("driver")  # the process that starts the job is Ray's driver
        except Exception as exc:
            _error(exc)
            traced = False
        with _untraced_services() if traced else contextlib.nullcontext():
            return init(*args, **kwargs)

    return flowmap_init


@contextlib.contextmanager
def _untraced_services() -> Iterator[None]:
    """Start Ray's node processes (raylet, GCS, log monitor) without tracing variables."""
    saved = {k: os.environ.get(k) for k in (*_FLOWMAP_VARS, "PYTHONPATH")}
    for k in _FLOWMAP_VARS:
        os.environ.pop(k, None)
    path = _pythonpath_without_boot()
    if path:
        os.environ["PYTHONPATH"] = path
    else:
        os.environ.pop("PYTHONPATH", None)
    try:
        yield
    finally:
        restore_environ(saved)


# -- where remote functions and actor classes are made --------------------------
def _wrap_make_remote(make_remote: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(make_remote)
    def flowmap_make_remote(function_or_class: Any, options: Any) -> Any:
        try:
            if inspect.isclass(function_or_class):
                function_or_class = _instrument_class(function_or_class)
            elif inspect.isfunction(function_or_class) and not (
                inspect.isgeneratorfunction(function_or_class)
                or inspect.isasyncgenfunction(function_or_class)
            ):
                function_or_class = _instrument_function(function_or_class)
        except Exception as exc:
            _error(exc)
        return make_remote(function_or_class, options)

    return flowmap_make_remote


def _instrument_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    owner = fn.__name__
    name = fn.__name__

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_task(*a: Any, **kw: Any) -> Any:
            caller = kw.pop(CALLER_KW, None)
            call = _Call(fn, owner, name, caller, a, kw)
            token = state.current_owner.set(owner)
            try:
                out = await fn(*a, **kw)
            finally:
                state.current_owner.reset(token)
            call.returned(out)
            return out

        task: Callable[..., Any] = async_task
    else:

        @functools.wraps(fn)
        def sync_task(*a: Any, **kw: Any) -> Any:
            caller = kw.pop(CALLER_KW, None)
            call = _Call(fn, owner, name, caller, a, kw)
            token = state.current_owner.set(owner)
            try:
                out = fn(*a, **kw)
            finally:
                state.current_owner.reset(token)
            call.returned(out)
            return out

        task = sync_task
    _set_signature(task, inspect.signature(fn), CALLER_KW)
    setattr(task, FLAG, True)
    return task


def _instrument_class(cls: type) -> type:
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
        members[name] = _instrument_method(fn, name)
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

    def __init__(self: Any, *a: Any, **kw: Any) -> None:
        caller = kw.pop(CALLER_KW, None)
        owner = kw.pop(OWNER_KW, None) or f"{cls.__name__}/0"
        set_owner(owner)  # one actor per worker process: its code runs as the actor
        call = _Call(base_init if own else None, owner, "__init__", caller, (self, *a), kw)
        base_init(self, *a, **kw)
        call.returned(None, record=False)

    if own:
        functools.update_wrapper(__init__, base_init)
        sig = inspect.signature(base_init)
    else:
        sig = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)])
    _set_signature(__init__, sig, CALLER_KW, OWNER_KW)
    return __init__


def _instrument_method(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_method(self: Any, *a: Any, **kw: Any) -> Any:
            caller = kw.pop(CALLER_KW, None)
            call = _Call(fn, current_owner(), name, caller, (self, *a), kw)
            out = await fn(self, *a, **kw)
            call.returned(out)
            return out

        method: Callable[..., Any] = async_method
    else:

        @functools.wraps(fn)
        def sync_method(self: Any, *a: Any, **kw: Any) -> Any:
            caller = kw.pop(CALLER_KW, None)
            call = _Call(fn, current_owner(), name, caller, (self, *a), kw)
            out = fn(self, *a, **kw)
            call.returned(out)
            return out

        method = sync_method
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
    """One task or method execution in a worker: records the call, then the result."""

    __slots__ = ("owner", "name", "caller")

    def __init__(self, fn: Any, owner: str, name: str, caller: Any, a: tuple,
                 kw: dict) -> None:
        caller_owner, ref_producers = _caller_info(caller)
        self.owner = owner
        self.name = name
        self.caller = caller_owner
        t = state.tracer
        if t is None:
            return
        try:
            inline, by_producer = _split_arguments(fn, a, kw, ref_producers)
            for producer, payload in sorted(by_producer.items()):
                t.hop(producer, owner, payload, name, (), None, None, "shm", None)
            t.hop(self.caller, owner, inline, name, (), None, None, "rpc", None)
        except Exception as exc:
            t.error(exc)

    def returned(self, out: Any, record: bool = True) -> None:
        t = state.tracer
        if t is None:
            return
        try:
            if record:
                t.hop(self.owner, self.caller, out, self.name, (), None, None, "rpc", None)
            # Ray may end this worker with SIGKILL right after the driver's
            # ray.get: put the hops on disk before the result is handed back.
            t.flush()
        except Exception as exc:
            t.error(exc)


def _caller_info(caller: Any) -> tuple[str, dict[Any, str]]:
    """`_flowmap_caller` is `(owner, {arg index or name: producer})`, or absent."""
    if isinstance(caller, (tuple, list)) and len(caller) == 2:
        return str(caller[0]), dict(caller[1] or {})
    return (str(caller) if caller else "driver"), {}


def _split_arguments(
    fn: Any, a: tuple, kw: dict, ref_producers: dict[Any, str]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Arguments by name: those passed inline, and those passed as refs, by producer."""
    bound = _arguments(fn, a, kw)
    if not ref_producers:
        return bound, {}
    names = list(bound)
    inline = dict(bound)
    by_producer: dict[str, dict[str, Any]] = {}
    for key, producer in ref_producers.items():
        # Positions count the caller's arguments, which exclude `self`.
        name = names[key] if isinstance(key, int) and key < len(names) else key
        if name in inline:
            by_producer.setdefault(producer, {})[name] = inline.pop(name)
    return inline, by_producer


def _arguments(fn: Any, a: tuple, kw: dict) -> dict[str, Any]:
    try:
        bound = dict(inspect.signature(fn).bind_partial(*a, **kw).arguments)
    except (TypeError, ValueError):
        bound = {f"arg{i}": v for i, v in enumerate(a)}
        bound.update(kw)
    bound.pop("self", None)
    return bound


# -- submitting side: tell the callee who calls, and who made its refs -----------
def _function_is_ours(remote_fn: Any) -> bool:
    return bool(getattr(getattr(remote_fn, "_function", None), FLAG, False))


def _wrap_submit(submit: Callable[..., Any], is_ours: Callable[[Any], bool]) -> Callable[..., Any]:
    @functools.wraps(submit)
    def flowmap_remote(self: Any, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        ours = state.tracer is not None and is_ours(self)
        if ours:
            kwargs = {**(kwargs or {}), CALLER_KW: _caller_payload(args, kwargs)}
        out = submit(self, args, kwargs, **options)
        if ours:
            _remember(out, self._function.__name__)
        return out

    return flowmap_remote


def _wrap_create(create: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(create)
    def flowmap_create(self: Any, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        name = None
        try:
            cls = self.__ray_metadata__.modified_class
            if getattr(cls, FLAG, False):
                name = options.get("name") or _next_actor_name(cls.__name__)
                kwargs = {**(kwargs or {}), CALLER_KW: _caller_payload(args, kwargs),
                          OWNER_KW: name}
        except Exception as exc:
            _error(exc)
        handle = create(self, args, kwargs, **options)
        if name is not None:
            with contextlib.suppress(Exception):
                _bounded_set(_actor_owners, handle._ray_actor_id.hex(), name)
        return handle

    return flowmap_create


def _wrap_method_call(call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def flowmap_method_call(self: Any, method_name: str, args: Any = None, kwargs: Any = None,
                            **options: Any) -> Any:
        owner = None
        try:
            params = self._ray_method_signatures.get(method_name) or ()
            if state.tracer is not None and any(p.name == CALLER_KW for p in params):
                kwargs = {**(kwargs or {}), CALLER_KW: _caller_payload(args, kwargs)}
                owner = _actor_owners.get(self._ray_actor_id.hex()) or (
                    self._ray_actor_creation_function_descriptor.class_name.rsplit(".", 1)[-1]
                )
        except Exception as exc:
            _error(exc)
        out = call(self, method_name, args, kwargs, **options)
        if owner is not None:
            _remember(out, owner)
        return out

    return flowmap_method_call


def _caller_payload(args: Any, kwargs: Any) -> tuple[str, dict[Any, str]]:
    """What the callee needs to attribute its arguments: our owner, and each ref's producer."""
    import ray

    refs: dict[Any, str] = {}
    for i, v in enumerate(args or ()):
        if isinstance(v, ray.ObjectRef):
            refs[i] = _producers.get(v.hex(), OBJECT_STORE)
    for k, v in (kwargs or {}).items():
        if isinstance(v, ray.ObjectRef):
            refs[k] = _producers.get(v.hex(), OBJECT_STORE)
    return current_owner(), refs


def _remember(out: Any, producer: str) -> None:
    import ray

    refs = out if isinstance(out, (list, tuple)) else [out]
    for ref in refs:
        if isinstance(ref, ray.ObjectRef):
            _bounded_set(_producers, ref.hex(), producer)


def _bounded_set(table: dict[str, str], key: str, value: str) -> None:
    if len(table) >= MAX_REMEMBERED_REFS:
        table.clear()
    table[key] = value


def _next_actor_name(class_name: str) -> str:
    counter = _actor_counts.setdefault(class_name, itertools.count())
    return f"{class_name}/{next(counter)}"


# -- the object store -----------------------------------------------------------
def _wrap_put(put: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(put)
    def flowmap_put(value: Any, *args: Any, **kwargs: Any) -> Any:
        ref = put(value, *args, **kwargs)
        t = state.tracer
        if t is not None:
            try:
                t.hop(current_owner(), OBJECT_STORE, value, "put", (), None, None, "shm", None)
            except Exception as exc:
                t.error(exc)
        return ref

    return flowmap_put


# -- helpers ----------------------------------------------------------------------
def _tracer_run_dir() -> str | None:
    t = state.tracer
    return os.path.abspath(t.run_dir) if t is not None else None


def _pythonpath_without_boot() -> str:
    from flowmap.capture.session import BOOT_DIR

    parts = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return os.pathsep.join(p for p in parts if p and os.path.abspath(p) != BOOT_DIR)


def _as_dict(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    return dict(value)


def _error(exc: BaseException) -> None:
    t = state.tracer
    if t is not None:
        t.error(exc)
