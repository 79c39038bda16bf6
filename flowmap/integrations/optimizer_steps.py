"""Training steps from the program's optimizer, for a program that never says which step it is in.

A script nobody instrumented has steps all the same: each `optimizer.step()` ends
one. torch calls a global post-hook after every optimizer's step
(`torch.optim.optimizer.register_optimizer_step_post_hook`), so no class is
patched for it. The step is the number of updates of the optimizer that made
the most (an actor and a critic each stepping once per iteration count one
step, not two); the work before the first update is step 0, which begins when
the first optimizer is made. The moment the program sets a step itself
(`flowmap.step`, a seam map's `step:`), these counts are ignored.
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType
from typing import Any

from flowmap.capture import importhook, state

_lock = threading.Lock()
_updates: dict[int, int] = {}  # id(optimizer) -> its updates so far
_kinds: dict[int, str] = {}  # id(optimizer) -> the step that updates it, by name


def install() -> None:
    importhook.on_import("torch.optim.optimizer", _install)


def _install(module: ModuleType) -> None:
    register = getattr(module, "register_optimizer_step_post_hook", None)
    optimizer = getattr(module, "Optimizer", None)
    if register is None or optimizer is None or getattr(optimizer, _MARK, False):
        return
    register(_after_step)
    init = optimizer.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        _made()

    __init__.__wrapped__ = init  # type: ignore[attr-defined]
    __init__.__doc__ = init.__doc__
    optimizer.__init__ = __init__
    setattr(optimizer, _MARK, True)


_MARK = "__flowmap_steps__"


def _made() -> None:
    """An optimizer exists: what runs from now until its first update is step 0."""
    t = state.tracer
    try:
        if t is not None and t.step is None and not t.explicit_steps:
            t.set_step(0, inferred=True)
    except Exception as exc:
        t.error(exc)  # type: ignore[union-attr]


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    t = state.tracer
    if t is None:
        return
    _wrote(t, optimizer)
    if t.explicit_steps:
        return
    try:
        with _lock:
            n = _updates[id(optimizer)] = _updates.get(id(optimizer), 0) + 1
            if n == 1:
                _kinds[id(optimizer)] = step_name(type(optimizer))
            step = max(_updates.values())
        if step == n and step != t.step:
            t.set_step(step, inferred=True)
    except Exception as exc:
        t.error(exc)


def named_owner() -> str | None:
    """The owner the program named for the code running now (an owner block, `set_owner`),
    None where it named none: a script with hops only runs as `main`, which is no stage."""
    owner = state.current_owner.get()
    if owner is None and not state.auto_owner and state.default_owner != "main":
        owner = state.default_owner
    return owner


def _wrote(t: Any, optimizer: Any) -> None:
    """The step wrote its parameters, as the owner the program named for it: the writer of
    weights another stage hands on (`StorageTable.stepped`); in code of no named owner,
    nothing is said (the hop's sender is taken, as for any write). Plain tensors only (a
    subclass's hook would see the reads), at most `MAX_PARAMS`."""
    owner = named_owner()
    if owner is None:
        return  # nothing to say: no parameter is read
    try:
        torch = sys.modules["torch"]
        if torch._C._is_torch_function_mode_enabled():
            return
        # the describers load at the first hop (the boot stays lean): keys as they write them
        from flowmap.capture.describers.torch_ import device_name

        plain = (torch.Tensor, torch.nn.Parameter)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        keys, holders = [], []
        for p in params[:MAX_PARAMS]:
            if type(p) in plain:
                ptr = p.data_ptr()
                keys.append(ptr if p.is_cpu else (ptr, device_name(p.device)))
                holders.append(p)
        if holders:
            w = t.writer
            with w.lock:
                if not t.closed:
                    w.stepped(owner, keys, holders)
    except Exception as exc:
        t.error(exc)


MAX_PARAMS = 4096


def step_name(cls: type) -> str:
    """`torch.optim.Adam.step`: as the user imports it, not where torch defines it."""
    module = cls.__module__
    if module.startswith("torch.optim."):
        module = "torch.optim"
    return f"{module}.{cls.__qualname__}.step"


def counted() -> tuple[int, str] | None:
    """This process's steps as counted here: (updates of the optimizer that made the most,
    its step's name); None when none was made or the program set its steps itself."""
    t = state.tracer
    if t is not None and t.explicit_steps:
        return None
    with _lock:
        if not _updates:
            return None
        top = max(_updates, key=lambda k: _updates[k])
        return _updates[top], _kinds.get(top, "optimizer.step")
