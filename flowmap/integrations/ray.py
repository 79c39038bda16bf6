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
- its return value is a hop `<callee> -> <caller>`, recorded where the caller
  resolves the ref (`ray.get`, transport `rpc`, leaves under `result`), or,
  when the caller passes the ref on unresolved, a `ref` hop of the handle
  alone (`flowmap.integrations.ray_refs`); an ObjectRef inside any payload is
  counted as its id's bytes, never as the object it points to;
- owners: a task is named by its function (`score`), an actor by its class
  and creation index in the creating process (`Learner/0`), or by its Ray
  name when it has one; code in an actor runs as that owner;
- `ray.put(value)` is a hop `<owner> -> object_store : put` (transport `shm`);
- an actor's call of its own methods (or a class instantiated inside an actor,
  as verl's colocated workers do) is no Ray call: nothing is recorded, and the
  inner `__init__` leaves the process's owner alone.

A framework integration that records its calls where it dispatches them
(verl's worker groups, `flowmap.integrations.verl`) names the actor it creates
through `actor_owner` and marks each submission through `dispatched`: the
callee then runs the method as that owner, at that step, records only the
result (where it is real, whether or not the driver fetches it), and no second
call hop.

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
import contextvars
import functools
import inspect
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from flowmap import environment
from flowmap.capture import forksafe, state
from flowmap.capture.api import current_owner, set_process_owner
from flowmap.capture.session import restore_environ
from flowmap.integrations import ray_node, ray_refs
from flowmap.integrations.ray_callee import (
    CALLER_KW,
    FLAG,
    OWNER_KW,
    Dispatched,
    instrument_class,
    instrument_function,
)
from flowmap.seams import ray_targets

OBJECT_STORE = ray_refs.OBJECT_STORE
_FLOWMAP_VARS = (environment.RUN_DIR, environment.IMPORT_ROOT, environment.SEAMS)

_install_lock = forksafe.lock()
_installed = False
_actor_counts: dict[str, itertools.count[int]] = {}
# The owner name of each actor this process created (actor id hex -> owner); bounded.
_actor_owners: dict[str, str] = {}
_actor_classes: dict[str, tuple[str, str]] = {}  # actor id hex -> its class (module, qualname)


# Set around an actor creation to name the actor, and around a method
# submission that an integration recorded itself (see the module docstring).
actor_owner: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "flowmap_ray_actor_owner", default=None)
dispatched: contextvars.ContextVar[Dispatched | None] = contextvars.ContextVar(
    "flowmap_ray_dispatched", default=None)


def runtime_env(run_dir: str | None = None, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Ray runtime environment whose workers trace into `run_dir` (default: this run).

    Pass it to `ray.init(runtime_env=...)` or `ray job submit --runtime-env-json`
    when the driver is not started by `flowmap trace`; `base` is merged in.
    """
    from flowmap.capture import session

    run_dir = run_dir or environment.get(environment.RUN_DIR) or _tracer_run_dir()
    if not run_dir:
        raise RuntimeError("no flowmap run to trace into: pass run_dir or run under flowmap trace")
    env = session.child_environment(run_dir, {"PYTHONPATH": _pythonpath_without_boot()})
    vars_ = {k: env[k] for k in (environment.RUN_DIR, environment.IMPORT_ROOT, "PYTHONPATH")}
    # workers obey the driver's switches, and fold as it does (`trace --aggregate`)
    for name in (environment.SEAMS, environment.TRANSPORTS, environment.AGGREGATE):
        if value := environment.get(name):
            vars_[name] = value
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

    needed = [(worker, "_make_remote"), (ray, "init"), (ray, "put"), (ray, "get"),
              (ray, "ObjectRef"),
              (remote_function.RemoteFunction, "_remote"), (actor.ActorClass, "_remote"),
              (actor.ActorHandle, "_actor_method_call")]
    missing = [f"{getattr(o, '__name__', o)}.{a}" for o, a in needed if not hasattr(o, a)]
    if missing:
        sys.stderr.write(f"flowmap: this Ray ({getattr(ray, '__version__', '?')}) lacks "
                         f"{', '.join(missing)}; Ray calls are not traced (flowmap-rl[ray] "
                         "pins the version it supports).\n")
        return
    worker._make_remote = _wrap_make_remote(worker._make_remote)
    ray.init = _wrap_init(ray.init)
    ray.put = _wrap_put(ray.put)
    ray.get = ray_refs.wrap_get(ray.get)
    ray_refs.describe_refs_as_handles(ray.ObjectRef)
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
            traced = bool(environment.get(environment.RUN_DIR) or _tracer_run_dir())
            if traced:
                kwargs["runtime_env"] = runtime_env(base=_as_dict(kwargs.get("runtime_env")))
                if state.default_owner == "main":
                    set_process_owner("driver")  # the process that starts the job is Ray's driver
        except Exception as exc:
            _error(exc)
            traced = False
        with _untraced_services() if traced else contextlib.nullcontext():
            out = init(*args, **kwargs)
        if traced:
            ray_node.here(current_owner())  # the driver runs here, on this node
        return out

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
                function_or_class = instrument_class(function_or_class)
            elif inspect.isfunction(function_or_class) and not (
                inspect.isgeneratorfunction(function_or_class)
                or inspect.isasyncgenfunction(function_or_class)
            ):
                function_or_class = instrument_function(function_or_class)
        except Exception as exc:
            _error(exc)
        return make_remote(function_or_class, options)

    return flowmap_make_remote


# -- submitting side: tell the callee who calls, and who made its refs -----------
def _function_is_ours(remote_fn: Any) -> bool:
    return bool(getattr(getattr(remote_fn, "_function", None), FLAG, False))


def _wrap_submit(submit: Callable[..., Any], is_ours: Callable[[Any], bool]) -> Callable[..., Any]:
    @functools.wraps(submit)
    def flowmap_remote(self: Any, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        ours = state.tracer is not None and is_ours(self)
        named = None
        if ours:
            fn = self._function
            named = ray_targets.of(fn.__module__, fn.__qualname__)
            kwargs = {**(kwargs or {}), CALLER_KW: _caller_payload(
                args, kwargs, (named.owner, named.name) if named else None)}
        out = submit(self, args, kwargs, **options)
        if ours:
            name = self._function.__name__
            owner = named.owner if named else name
            ray_refs.remember(out, owner, _reply(named, name))
        return out

    return flowmap_remote


def _wrap_create(create: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(create)
    def flowmap_create(self: Any, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        name = None
        try:
            cls = self.__ray_metadata__.modified_class
            if getattr(cls, FLAG, False):
                where = _class_key(cls)
                name = (actor_owner.get() or options.get("name") or _next_actor_name(
                    ray_targets.actor_owner(*where) or cls.__name__))
                kwargs = {**(kwargs or {}), CALLER_KW: _caller_payload(args, kwargs),
                          OWNER_KW: name}
        except Exception as exc:
            _error(exc)
        handle = create(self, args, kwargs, **options)
        if name is not None:
            with contextlib.suppress(Exception):
                ray_refs.bounded_set(_actor_owners, handle._ray_actor_id.hex(), name)
                ray_refs.bounded_set(_actor_classes, handle._ray_actor_id.hex(), where)
        return handle

    return flowmap_create


def _wrap_method_call(call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def flowmap_method_call(self: Any, method_name: str, args: Any = None, kwargs: Any = None,
                            **options: Any) -> Any:
        owner = None
        reply = None
        try:
            params = self._ray_method_signatures.get(method_name) or ()
            if state.tracer is not None and any(p.name == CALLER_KW for p in params):
                module, qualname = _actor_classes.get(self._ray_actor_id.hex()) or (
                    self._ray_actor_creation_function_descriptor.module_name,
                    self._ray_actor_creation_function_descriptor.class_name)
                named = ray_targets.of(module, f"{qualname}.{method_name}")
                kwargs = {**(kwargs or {}), CALLER_KW: _caller_payload(
                    args, kwargs, ("", named.name) if named else None)}
                done = dispatched.get()
                owner = (done.owner if done is not None else None) or _actor_owners.get(
                    self._ray_actor_id.hex()) or (
                    self._ray_actor_creation_function_descriptor.class_name.rsplit(".", 1)[-1]
                )
                reply = None if done is not None else _reply(named, method_name)
        except Exception as exc:
            _error(exc)
        out = call(self, method_name, args, kwargs, **options)
        if owner is not None:
            ray_refs.remember(out, owner, reply)
        return out

    return flowmap_method_call


def _reply(named: ray_targets.Claim | None, name: str) -> ray_refs.Reply | None:
    """Who records the result of this submission's ref when it is resolved, and how: the
    caller, under the call's name, or as its seam-map entry says (None: `result: false`)."""
    if named is None:
        return current_owner(), name, None
    if not named.plan.spec.result:
        return None
    return named.plan.spec.caller or current_owner(), named.result_name, named.plan


def _caller_payload(args: Any, kwargs: Any,
                    named: tuple[str, str] | None = None) -> tuple[Any, ...]:
    """What the callee needs to attribute its arguments: our owner, each ref's producer,
    the call's `Dispatched` fields when an integration recorded it already, and the
    (owner, call name) a seam map gave the target (`ray_targets`; owner "" for a method,
    which runs as its actor).

    A ref this process got back from a call and passes on unresolved is a
    `ref` hop of the handle from its producer to us (`ray_refs.passed_on`).
    """
    import ray

    refs: dict[Any, str] = {}
    for key, v in (*enumerate(args or ()), *(kwargs or {}).items()):
        if isinstance(v, ray.ObjectRef):
            refs[key] = ray_refs.producer_of(v)
            try:
                ray_refs.passed_on(v)
            except Exception as exc:
                _error(exc)
    done = dispatched.get()
    if named is not None:
        return current_owner(), refs, tuple(done) if done is not None else None, named
    if done is not None:
        return current_owner(), refs, tuple(done)
    return current_owner(), refs


def _class_key(cls: type) -> tuple[str, str]:
    """(module, qualname) of the user's actor class: Ray's subclass of it has neither."""
    ours = next((k for k in cls.__mro__ if FLAG in vars(k)), cls)
    return ours.__module__, ours.__qualname__


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
                t.hop(src=current_owner(), dst=OBJECT_STORE, payload=value, name="put", items=(),
                      step=None, version=None, transport="shm", dims=None)
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
