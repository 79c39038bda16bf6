"""Run a script as `__main__` so that a seam map can name the script's own functions.

A script run as `__main__` is no module any import hook sees, and its
functions exist only once its top-level code has defined them. flowmap runs
the script itself, so it can wrap them as they are defined: the top-level
code runs with the module's dict as its globals and a thin mapping as its
locals, which stores every top-level name into the module's dict and tells
`on_bind` the moment a name is bound (`def`, `class`, `import`, assignment).
Functions the script calls look their globals up in that same dict, so they
find the wrapper. (A name that some function of the script declares `global`
is stored by the top-level code straight into the dict, unseen: no function or
class is bound that way in practice.) Without `on_bind` the script runs
exactly as `runpy.run_path` runs it.

The module object is kept after the run (`main_module`), so that discovery can
still name a function of the script once the script has finished.
"""

from __future__ import annotations

import io
import os
import runpy
import sys
import types
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

# Told each top-level name the script binds; returns True once it needs to hear no more.
OnBind = Callable[[types.ModuleType, str], bool]

_main: types.ModuleType | None = None


def main_module() -> types.ModuleType | None:
    """The module of the script run last by `run_script` in this process, if any."""
    return _main


def run_script(path: str, on_bind: OnBind | None = None) -> None:
    """Run the script at `path` as `__main__` (as `runpy.run_path` does), telling `on_bind`
    each top-level name it binds. A directory or zip file runs through runpy, unwatched."""
    global _main
    if not os.path.isfile(path) or not path.endswith((".py", ".pyw")):
        runpy.run_path(path, run_name="__main__")
        return
    with io.open_code(path) as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None,
                           __spec__=None)
    _main = module
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        if on_bind is None:
            exec(code, module.__dict__)
        else:
            exec(code, module.__dict__, _binding(module, on_bind))
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _binding(module: types.ModuleType, on_bind: OnBind) -> _Binding:
    """A `_Binding` of a class of its own, whose loads (and, once `on_bind` has heard all it
    needs, stores) are the module dict's own C methods, not a Python method per name.

    Only the script's top-level code pays (its functions read their globals directly): a
    top-level loop of `x = x + i`, 1,000,000 times, takes 0.07 s plain, 0.27 s while names are
    watched and 0.17 s after (this machine, one run each way, interleaved); a training loop's
    model code dwarfs it.
    """
    names = module.__dict__
    cls = type("_Binding", (_Binding,), {"__getitem__": staticmethod(names.__getitem__),
                                         "__contains__": staticmethod(names.__contains__)})
    binding: _Binding = cls(module, on_bind)
    return binding


class _Binding(MutableMapping[str, Any]):
    """The top-level code's locals: the module's dict, with a word to `on_bind` per store."""

    __slots__ = ("module", "names", "on_bind")

    def __init__(self, module: types.ModuleType, on_bind: OnBind) -> None:
        self.module = module
        self.names: dict[str, Any] = module.__dict__
        self.on_bind = on_bind

    def __getitem__(self, name: str) -> Any:
        return self.names[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self.names[name] = value
        try:
            done = self.on_bind(self.module, name)
        except Exception:  # recording must never break the user's program
            done = False
        if done:  # every target is wrapped: later stores go straight to the dict
            type(self).__setitem__ = staticmethod(self.names.__setitem__)  # type: ignore[assignment]

    def __delitem__(self, name: str) -> None:
        del self.names[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.names
