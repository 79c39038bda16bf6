"""Put seam-map wrappers in place: on modules already imported, and on import.

Each target `package.module:Class.method` is resolved once its module has run:
the attribute path is walked from the module, and the function (or the
function inside a `staticmethod`/`classmethod`) is replaced by the recording
wrapper. Targets whose module never loads, or that name something the module
does not have, are remembered so the run can end with one warning each; the
program itself always goes on.

`__main__:function` names a function of the script `flowmap trace` runs: no
import hook sees that module, so the script runner (`flowmap.capture.script`)
calls `bind_main` as each top-level name is bound, and the target is wrapped
right after its `def`. A Ray task or actor method is not wrapped (that would
break `.remote`): it is claimed in `flowmap.seams.ray_targets`, where the Ray
integration finds the map's words to record its calls with, and a key it cannot
honour is warned of. A plain function imported into other modules
(`from .ops import kl`) is rebound there too: the modules imported after the
patch get the wrapper from the patched module, and those already imported get
it here, so no call is lost to a copy of the name.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable
from types import ModuleType
from typing import Any

from flowmap.capture import forksafe, importhook
from flowmap.seams import ray_targets
from flowmap.seams.spec import SeamMap, SeamSpec
from flowmap.seams.wrapper import MARKER, wrap

MAIN = "__main__"


class Patcher:
    """Applies one seam map in this process and keeps account of every target."""

    def __init__(
        self, seam_map: SeamMap, on_outcome: Callable[[str, str | None], None] | None = None,
        *, warn: bool = True,
    ) -> None:
        self.seam_map = seam_map
        self.warn = warn  # say which keys a Ray target ignores (the process that reports)
        self.lock = forksafe.lock()
        self.patched: set[str] = set()
        self.failed: dict[str, str] = {}  # target -> why it could not be patched
        self._on_outcome = on_outcome

    def install(self) -> None:
        ray_targets.know(self.seam_map.seams)  # a Ray worker may run a target it never imports
        for module, specs in self.seam_map.by_module().items():
            if module == MAIN:
                continue  # patched by `bind_main` as the script defines them
            importhook.on_import(module, functools.partial(self._patch_module, specs=specs))

    def has_main_targets(self) -> bool:
        return any(s.module == MAIN for s in self.seam_map.seams)

    def bind_main(self, module: ModuleType, name: str) -> bool:
        """The script run as `__main__` bound `name`: patch the targets that start at it.
        True once every `__main__` target is patched (the script need tell no more)."""
        specs = [s for s in self.seam_map.seams
                 if s.module == MAIN and s.qualname.split(".", 1)[0] == name]
        if specs:
            self._patch_module(module, specs)
        return all(s.target in self.patched for s in self.seam_map.seams if s.module == MAIN)

    def unresolved(self) -> dict[str, str]:
        """Non-optional targets not patched here, with the reason."""
        out: dict[str, str] = {}
        for spec in self.seam_map.seams:
            if spec.optional or spec.target in self.patched:
                continue
            never = (f"module {spec.module} was never imported" if spec.module != MAIN else
                     "the script run by flowmap trace never defined it")
            out[spec.target] = self.failed.get(spec.target, never)
        return out

    def _patch_module(self, module: ModuleType, specs: list[SeamSpec]) -> None:
        for spec in specs:
            try:
                why = _patch(module, spec, self.warn)
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}"
            with self.lock:
                if why is None:
                    self.patched.add(spec.target)
                else:
                    self.failed[spec.target] = why
            if self._on_outcome is not None:
                self._on_outcome(spec.target, why)


def _patch(module: ModuleType, spec: SeamSpec, warn: bool = True) -> str | None:
    """Replace the target with its wrapper; returns why not, or None when done."""
    holder: Any = module
    *outer, name = spec.qualname.split(".")
    walked = module.__name__
    for part in outer:
        if not hasattr(holder, part):
            return f"{walked} has no attribute {part}"
        holder = getattr(holder, part)
        walked += f".{part}"
        if ray_targets.is_ray(holder):  # an actor class: its methods are recorded by Ray's side
            return _claim_ray(spec, warn)
    try:
        raw = inspect.getattr_static(holder, name)
    except AttributeError:
        return f"{walked} has no attribute {name}"
    if ray_targets.is_ray(raw):
        return _claim_ray(spec, warn)
    if isinstance(raw, (staticmethod, classmethod)):
        fn = raw.__func__
        if getattr(fn, MARKER, None):
            return None
        setattr(holder, name, type(raw)(wrap(fn, spec)))
        return None
    if not callable(raw) or isinstance(raw, type):
        return f"{spec.module}:{spec.qualname} is a {type(raw).__name__}, not a function or method"
    if getattr(raw, MARKER, None):
        return None  # already patched (a forked child, or the map loaded twice)
    wrapper = wrap(raw, spec)
    setattr(holder, name, wrapper)
    if holder is module and isinstance(raw, types.FunctionType) and module.__name__ != MAIN:
        _rebind_copies(module, raw, wrapper)  # a script's own function lives in `__main__` only
    return None


def _claim_ray(spec: SeamSpec, warn: bool) -> str | None:
    """A Ray task or actor method: wrapping it would break `.remote`; the Ray integration
    records its calls as the map says (`flowmap.seams.ray_targets`). A key it cannot
    honour is named, with why, rather than silently dropped."""
    ray_targets.claim(spec)
    for key in ray_targets.ignored(spec) if warn else ():
        sys.stderr.write(f"flowmap: warning: seam-map target {spec.target} is a Ray task or "
                         f"actor method, so its `{key}` does not apply: "
                         f"{ray_targets.NOT_FOR_RAY[key]}.\n")
    return None


def _rebind_copies(home: ModuleType, raw: Any, wrapper: Any) -> None:
    """Modules that imported the function before it was patched hold the bare one: give
    them the wrapper, so the calls made through their name are recorded too."""
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if module is home or not isinstance(names, dict):
            continue
        try:
            for key, value in list(names.items()):
                if value is raw:
                    names[key] = wrapper
        except Exception:
            continue
