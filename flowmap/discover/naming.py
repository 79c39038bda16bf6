"""Turn a watched function into a seam-map target, or say why it cannot be one.

A target is `module:qualname`, and the patcher reaches it by walking
attributes from the module. So a lambda, a closure or generated code has no
target. A function of the script that flowmap runs is `__main__:name`:
`flowmap trace` wraps it as the script defines it. A function imported into
other modules (`from .utils import split`) is named where it is defined: the
patcher gives the wrapper to every module that imported it.
"""

from __future__ import annotations

import sys
from typing import Any

from flowmap.discover.filters import CodeInfo


def resolve(info: CodeInfo) -> tuple[str | None, str | None]:
    """(target, None), or (None, the reason it cannot be a target)."""
    q = info.qualname
    if "<lambda>" in q:
        return None, "a lambda: it has no name a seam map can patch"
    if "<locals>" in q:
        outer = q.split(".<locals>", 1)[0]
        return None, f"a closure defined inside {outer}: nothing outside it can name it"
    if info.filename.startswith("<"):
        return None, f"generated code ({info.filename}): no module attribute holds it"
    if info.module == "__main__":
        return _in_script(info)
    module = sys.modules.get(info.module)
    if module is None:
        # Loaded by a framework under a name it never registered (a Ray worker
        # unpickling a class): a map can still name it if the import system finds it.
        if _findable(info.module):
            return f"{info.module}:{q}", None
        return None, f"module {info.module} is not importable by name"
    if is_kernel(info):
        return None, KERNEL
    if _is_code(_walk(module, q), info):
        return f"{info.module}:{q}", None
    return None, (f"{info.module}.{q} is not this function at run time "
                  "(replaced or wrapped without functools.wraps)")


def _in_script(info: CodeInfo) -> tuple[str | None, str | None]:
    """A function of the script run as `__main__`: a target when flowmap ran that script
    (in this process) and the name still holds the function."""
    from flowmap.capture.script import main_module

    module = main_module()
    if module is None or getattr(module, "__file__", None) != info.filename:
        return None, ("defined in a script run as __main__ by something other than flowmap "
                      "(a child process, or python itself); move it into a module")
    if _is_code(_walk(module, info.qualname), info):
        return f"__main__:{info.qualname}", None
    return None, (f"the script's {info.qualname} is not this function at run time "
                  "(replaced or wrapped without functools.wraps)")


KERNEL = "a torch.autograd.Function's forward or backward: a kernel autograd calls, not a hand-over"


def is_kernel(info: CodeInfo) -> bool:
    """Code of a `torch.autograd.Function` subclass: it and all it calls is library internals."""
    torch = sys.modules.get("torch")
    if torch is None or "." not in info.qualname:
        return False
    holder = _walk(sys.modules.get(info.module), info.qualname.rsplit(".", 1)[0])
    try:
        return isinstance(holder, type) and issubclass(holder, torch.autograd.Function)
    except Exception:
        return False


RAY = ("a Ray task or actor method: in a seam map it is not wrapped (that would break "
       "`.remote`); flowmap's Ray integration records its calls under the map's owner and names")


def recheck(records: list[dict[str, Any]]) -> None:
    """In the process that ran the program: mark targets that are Ray remote functions or
    actor methods (a worker, which runs the plain function, cannot tell), so the seam map
    says how they are recorded."""
    from flowmap.seams.ray_targets import is_ray

    for rec in records:
        for f in rec["functions"].values():
            module = sys.modules.get(f["module"])
            holder = getattr(module, "__dict__", {}).get(f["qualname"].split(".", 1)[0])
            if f.get("target") and module is not None and is_ray(holder):
                f["ray"] = True


def _findable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except Exception:
        return False


def _walk(holder: Any, qualname: str) -> Any:
    for part in qualname.split("."):
        try:
            holder = holder.__dict__[part] if hasattr(holder, "__dict__") and \
                part in holder.__dict__ else getattr(holder, part)
        except Exception:
            return None
    return holder


def _is_code(obj: Any, info: CodeInfo) -> bool:
    for _ in range(8):  # through staticmethod/classmethod and decorators' __wrapped__
        if obj is None:
            return False
        code = getattr(obj, "__code__", None)
        if code is not None and code.co_firstlineno == info.lineno and \
                code.co_filename == info.filename:
            return True
        obj = getattr(obj, "__func__", None) or getattr(obj, "__wrapped__", None)
    return False
