"""Run a script as `__main__` so that a seam map can name the script's own functions.

A script run as `__main__` is no module any import hook sees, and its
functions exist only once its top-level code has defined them. flowmap runs
the script itself, so it can wrap them as they are defined: the top-level
code runs with the module's dict as its globals and a thin mapping as its
locals, which stores every top-level name into the module's dict and tells
`on_bind` the moment a name is bound (`def`, `class`, `import`, assignment).
Functions the script calls look their globals up in that same dict, so they
find the wrapper. Without `on_bind` the script runs exactly as
`runpy.run_path` runs it.

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

OnBind = Callable[[types.ModuleType, str], None]

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
            exec(code, module.__dict__, _Binding(module, on_bind))
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


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
            self.on_bind(self.module, name)
        except Exception:  # recording must never break the user's program
            pass

    def __delitem__(self, name: str) -> None:
        del self.names[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.names
