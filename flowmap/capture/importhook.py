"""Run a callback when a module finishes importing: the patch-on-import hook.

Seam maps and integrations (Ray) must patch modules that the program imports
after tracing started. One `sys.meta_path` finder, first in the list, answers
only for module names something waits for: it asks the other finders for the
real spec and wraps its loader so that, right after the module's code ran and
before the importer gets the module back, the callbacks run. So a later
`from trl.trainer.grpo_trainer import GRPOTrainer` already sees the patched
class. The module's own `__loader__` and `__spec__.loader` are restored after
execution; nothing of the hook stays visible on the module. The finder and
loader are plain classes with the methods the import system calls, not
`importlib.abc` subclasses: importing `importlib.abc` pulls in
`importlib.resources`, `tempfile` and `shutil`, and this module is imported
at every traced child's start-up.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

from flowmap.capture import forksafe

Callback = Callable[[ModuleType], None]

_lock = forksafe.lock(reentrant=True)  # a forked child finds it released
_waiting: dict[str, list[Callback]] = {}
_finder: _Finder | None = None


def once(install: Callback) -> Callback:
    """An integration's `install(module)`, run at its first call only: the hooks may be
    armed again (a second `tracing()` block), and a class patched twice records twice."""
    done = False

    @functools.wraps(install)
    def first(module: ModuleType) -> None:
        nonlocal done
        if not done:
            done = True
            install(module)

    return first


def on_import(name: str, callback: Callback) -> None:
    """Call `callback(module)` once `name` is imported (now, if it already is)."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _waiting.setdefault(name, []).append(callback)
            _ensure_finder()
            return
    _run(callback, module)


def waiting() -> list[str]:
    """Names of modules some callback still waits for."""
    with _lock:
        return sorted(_waiting)


def _ensure_finder() -> None:
    global _finder
    if _finder is None:
        _finder = _Finder()
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def _run(callback: Callback, module: ModuleType) -> None:
    try:
        callback(module)
    except Exception as exc:  # a hook must never break the user's import
        sys.stderr.write(f"flowmap: could not instrument {module.__name__} ({exc}); "
                         "the program goes on.\n")


def _loaded(module: ModuleType) -> None:
    with _lock:
        callbacks = _waiting.pop(module.__name__, [])
    for cb in callbacks:
        _run(cb, module)


class _Finder:
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _waiting:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = cast(Any, _Loader(spec.loader))
        return spec


class _Loader:
    """Delegates to the real loader; runs the callbacks after the module's code."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # Put the real loader back first: the module's code may look at it
        # (importlib.resources, pkgutil), and it must stay once we are done.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _loaded(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
