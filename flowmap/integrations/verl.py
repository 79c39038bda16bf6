"""verl: trace a verl job as its single controller dispatches it (written against verl 0.9.1).

verl runs on Ray, so the Ray integration already starts a shard in every
worker; this module gives those workers verl's names and records each
worker-group call once, where the worker group splits it:

- owners are roles and ranks, `actor_rollout/0`, `critic/1`, `reward/0`,
  and the process that drives the groups is `driver`. A group's role is, in
  order: its key in `create_colocated_worker_cls(class_dict)` (what
  `RayPPOTrainer` uses: `str(Role.ActorRollout)` is `actor_rollout`); the
  `role=` argument its class is built with (verl's `ActorRolloutRefWorker`
  takes one); else its class name in snake case without `Worker`
  (`RewardWorker` -> `reward`). Nothing random (verl's actor-name prefix)
  enters a name, so two runs of one job have the same seams.
- a call `wg.generate_sequences(batch)` is one hop `driver -> role/rank :
  generate_sequences` per rank the group calls, carrying what that rank is
  sent: its chunk of the `DataProto` under `DP_COMPUTE_PROTO`, the whole
  under `ONE_TO_ALL` (transport `rpc`); arguments passed as object refs are
  recorded by the worker as `shm` hops from their producer. Each rank's
  result is a hop `role/rank -> driver`, recorded in the worker, where it is
  real. The Ray-level hops of these calls are not recorded again.
- the method body runs as `role/rank`, so seams and collectives inside it
  belong to that role even when one process hosts several (colocated mode).
- `meta_info["global_steps"]` of a `DataProto` argument becomes flowmap's
  step, on the driver and in the worker that receives it.

Like the Ray integration, all of this fails soft: anything unexpected in
verl's classes leaves them untouched and counts a tracer error.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from flowmap.capture import calls, importhook, state
from flowmap.capture.api import current_owner
from flowmap.integrations import ray as ray_integration
from flowmap.integrations.ray_callee import Dispatched

Args = tuple[Any, ...]  # a recorded call's positional arguments
Kwargs = dict[str, Any]  # and its keyword arguments

# Set on a RayClassWithInitArgs made by create_colocated_worker_cls: role -> user class.
ROLES_ATTR = "_flowmap_verl_roles"


@importhook.once
def install(base: ModuleType) -> None:
    """Patch `verl.single_controller.ray.base` (idempotent)."""
    group = getattr(base, "RayWorkerGroup", None)
    needed = ["_execute_remote_single_worker", "_create_worker"]
    if group is None or any(not hasattr(group, n) for n in needed) or not hasattr(
            base, "create_colocated_worker_cls"):
        sys.stderr.write("flowmap: this verl lacks RayWorkerGroup._execute_remote_single_worker "
                         "or _create_worker; verl calls are traced through Ray only.\n")
        return
    group._execute_remote_single_worker = _wrap_execute(group._execute_remote_single_worker)
    group._create_worker = _wrap_create_worker(group._create_worker)
    for name in ("create_colocated_worker_cls", "create_colocated_worker_cls_fused"):
        original = getattr(base, name, None)
        if original is None:
            continue
        wrapped = _wrap_colocate(original)
        setattr(base, name, wrapped)
        # Modules that imported the name before tracing started (flowmap.tracing()
        # inside a program that already imported verl) get the wrapped one too.
        for holder in ("verl.single_controller.ray", "verl.trainer.ppo.ray_trainer"):
            module = sys.modules.get(holder)
            if module is not None and getattr(module, name, None) is original:
                setattr(module, name, wrapped)


# -- names --------------------------------------------------------------------
def role_from_class(name: str) -> str:
    """`ActorRolloutRefWorker` -> `actor_rollout_ref`; `Worker` alone stays `worker`."""
    stem = name[: -len("Worker")] if name.endswith("Worker") and name != "Worker" else name
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", stem).lower()


def _user_class(cls: Any) -> Any:
    """The user's class behind `ray.remote(cls)` (an ActorClass)."""
    try:
        return cls.__ray_metadata__.modified_class.__ray_actor_class__
    except AttributeError:
        return getattr(cls, "__ray_actor_class__", cls)


def _group_roles(wg: Any) -> tuple[dict[str, Any], bool]:
    """The group's roles (role -> user class), and whether they are colocated (prefixed)."""
    cia = getattr(wg, "ray_cls_with_init", None)
    if cia is None:
        return {"worker": None}, False
    roles = getattr(cia, ROLES_ATTR, None)
    if roles:
        return roles, True
    cls = _user_class(cia.cls)
    role = (getattr(cia, "kwargs", None) or {}).get("role")
    if isinstance(role, str) or type(role).__name__ == "Role":
        return {str(role): cls}, False
    return {role_from_class(getattr(cls, "__name__", "worker")): cls}, False


def _call_role(wg: Any, method_name: str) -> tuple[str, str, Any]:
    """The role a call goes to, the method's own name, and the class that defines it."""
    roles, colocated = _group_roles(wg)
    sub = getattr(wg, "sub_cls_name", "")
    if sub:  # a group spawned from a FusedWorker: methods are not prefixed
        return sub, method_name, roles.get(sub)
    if colocated:
        for role in sorted(roles, key=len, reverse=True):
            if method_name.startswith(role + "_"):
                return role, method_name[len(role) + 1:], roles[role]
    role = next(iter(roles))
    return role, method_name, roles[role]


# -- the driver side -----------------------------------------------------------------
def _wrap_colocate(make: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(make)
    def flowmap_colocate(class_dict: dict[str, Any], *a: Any, **kw: Any) -> Any:
        cia = make(class_dict, *a, **kw)
        try:
            setattr(cia, ROLES_ATTR, {str(k): _user_class(v.cls) for k, v in class_dict.items()})
        except Exception as exc:
            _error(exc)
        return cia

    return flowmap_colocate


def _wrap_create_worker(create: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(create)
    def flowmap_create_worker(self: Any, rank: int, *a: Any, **kw: Any) -> Any:
        token = None
        try:
            roles, _ = _group_roles(self)  # RayWorkerGroup sets ray_cls_with_init first
            # One process per rank: code outside a dispatched call runs as its first role.
            token = ray_integration.actor_owner.set(f"{next(iter(roles))}/{int(rank)}")
        except Exception as exc:
            _error(exc)
        try:
            return create(self, rank, *a, **kw)
        finally:
            if token is not None:
                ray_integration.actor_owner.reset(token)

    return flowmap_create_worker


def _wrap_execute(execute: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(execute)
    def flowmap_execute(self: Any, worker: Any, method_name: str, *args: Any, **kwargs: Any
                        ) -> Any:
        t = state.tracer
        token = None
        if t is not None:
            try:
                token = _record_call(t, self, worker, method_name, args, kwargs)
            except Exception as exc:
                t.error(exc)
        try:
            return execute(self, worker, method_name, *args, **kwargs)
        finally:
            if token is not None:
                ray_integration.dispatched.reset(token)

    return flowmap_execute


def _record_call(t: Any, wg: Any, worker: Any, method_name: str, args: Args, kwargs: Kwargs
                 ) -> Any:
    """Record `driver -> role/rank` with what this rank is sent; mark the Ray submission."""
    role, name, cls = _call_role(wg, method_name)
    rank = next((i for i, w in enumerate(wg._workers) if w is worker), 0)
    owner = f"{role}/{rank}"
    step = _step_of(args, kwargs)
    if step is not None and step != t.step:
        t.set_step(step)
    payload = _arguments(cls, name, args, kwargs)
    t.hop(src=current_owner(), dst=owner, payload=payload, name=name, items=(), step=None,
          version=None, transport="rpc", dims=None)
    return ray_integration.dispatched.set(Dispatched(owner, name, step))


def _step_of(args: Args, kwargs: Kwargs) -> int | None:
    for v in (*args, *kwargs.values()):
        meta = getattr(v, "meta_info", None)
        if isinstance(meta, dict) and isinstance(meta.get("global_steps"), int):
            return int(meta["global_steps"])
    return None


@functools.lru_cache(maxsize=1024)
def _method_arguments(cls: Any, name: str) -> calls.Arguments | None:
    method = getattr(cls, name, None)
    return None if method is None else calls.Arguments(method)


def _arguments(cls: Any, name: str, args: Args, kwargs: Kwargs) -> dict[str, Any]:
    """The call's arguments by the method's parameter names; object refs left to the worker."""
    import ray

    arguments = _method_arguments(cls, name) if cls is not None else None
    try:
        # the worker group calls the unbound method's remote twin: `self` is the actor
        bound = (calls.payload(arguments.bind((None, *args), kwargs))
                 if arguments is not None and arguments.sig is not None else None)
    except TypeError:
        bound = None
    if bound is None:
        bound = {f"arg{i}": v for i, v in enumerate(args)}
        bound.update(kwargs)
    return {k: v for k, v in bound.items() if not isinstance(v, ray.ObjectRef)}


def _error(exc: BaseException) -> None:
    t = state.tracer
    if t is not None:
        t.error(exc)
