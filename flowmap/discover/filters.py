"""Which code objects discovery watches, decided once per code object and cached.

The hook runs on every Python call of the program, so the expensive question
("is this code worth watching?") is answered once per code object and the
answer kept forever: the standard library, flowmap's own capture code, torch
and the model libraries below it are never watched. This is what keeps the
cost of a discovery run bounded.
"""

from __future__ import annotations

import dis
import os
import sys
from dataclasses import dataclass
from types import CodeType
from typing import Any

import flowmap

# flowmap's own code is never a seam of the user's program; its built-in
# trainer (`flowmap.trainer`, in the repo's trainer/ folder) is a user program.
_FLOWMAP_DIR = os.path.dirname(os.path.abspath(flowmap.__file__)) + os.sep
_FLOWMAP_CLI_PREFIX = "flowmap.cli"

# Libraries whose internals are never a hand-over between owners: tensor
# kernels, model code, serialisation, CLIs. `--include PKG` watches one anyway
# (torch excepted: its internals are the operators, not seams).
LIBRARIES = frozenset({
    "torch", "torchvision", "torchaudio", "functorch", "triton", "numpy", "scipy",
    "transformers", "accelerate", "peft", "deepspeed", "safetensors", "tokenizers",
    "huggingface_hub", "datasets", "pyarrow", "pandas", "fsspec", "filelock", "packaging",
    "yaml", "typer", "click", "rich", "tqdm", "jinja2", "regex", "psutil",
    "pytest", "_pytest", "pluggy", "ray", "grpc", "google", "msgpack", "zmq",
    "typing_extensions", "sympy", "networkx", "dill", "multiprocess", "xxhash",
    "setuptools", "pkg_resources", "importlib_metadata", "_distutils_hack",
    "tensordict", "cloudpickle", "hydra", "omegaconf", "codetiming",
})
# Frameworks' own dispatch and containers: their hand-overs are recorded by
# flowmap's integrations (verl's worker-group dispatch, DataProto), so they
# would only repeat those hops as candidates.
PLUMBING = ("verl.single_controller", "verl.protocol", "verl.utils.transferqueue_utils")
_ALWAYS_IGNORED = frozenset({"torch", "functorch", "triton"})

# Generator, coroutine and async-generator code: each resume is a new call
# event, so the payload of one logical call cannot be told apart.
_RESUMABLE = 0x20 | 0x80 | 0x200


_COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<module>"})


@dataclass(slots=True, frozen=True)
class Filters:
    """What the user narrowed the search to (`--include`, `--exclude`, `--min-bytes`)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    min_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"include": list(self.include), "exclude": list(self.exclude),
                "min_bytes": self.min_bytes}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Filters:
        return cls(tuple(d.get("include", ())), tuple(d.get("exclude", ())),
                   int(d.get("min_bytes", 0)))


@dataclass(slots=True, eq=False)
class CodeInfo:
    """One watched code object: its name, and what discovery saw of its calls."""

    module: str
    qualname: str
    filename: str
    lineno: int
    argnames: tuple[str, ...]  # the arguments, without self/cls
    has_self: bool
    caller_module: str | None = None  # where a plain function was looked up from
    stats: Any = None  # its CodeStats; None: a step marker only, not a candidate
    step: str | None = None  # a path to the training step, read at each call
    nn_module: bool | None = None  # a method of a torch.nn.Module (known at its first call)
    ignores_args: bool = False  # its body never reads its arguments (`def log(self, *a): pass`)

    @property
    def key(self) -> str:
        return f"{self.module}:{self.qualname}"

    @property
    def package(self) -> str:
        return self.module.split(".", 1)[0]


def _matches(module: str, names: tuple[str, ...]) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def decide(code: CodeType, module: str | None, filters: Filters) -> CodeInfo | None:
    """The CodeInfo of a code object worth watching, or None to ignore it forever."""
    if module is None or code.co_flags & _RESUMABLE:
        return None
    name = code.co_name
    if name.startswith("__") and name.endswith("__") and name != "__call__":
        return None  # constructors, reprs, operators: never a hand-over
    if name in _COMPREHENSIONS:
        return None  # an expression inside a function (3.11 gives it its own code), a module
    top = module.split(".", 1)[0]
    if top in _ALWAYS_IGNORED or _matches(module, filters.exclude):
        return None
    if filters.include:
        if not _matches(module, filters.include):
            return None
    elif top in LIBRARIES or top in sys.stdlib_module_names or _matches(module, PLUMBING):
        return None
    filename = code.co_filename
    if filename.startswith(_FLOWMAP_DIR) or module.startswith(_FLOWMAP_CLI_PREFIX):
        return None
    nargs = code.co_argcount + code.co_kwonlyargcount
    nargs += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    names = code.co_varnames[:nargs]
    has_self = bool(names) and names[0] in ("self", "cls")
    args = tuple(names[1:] if has_self else names)
    return CodeInfo(
        module=module,
        qualname=getattr(code, "co_qualname", name),
        filename=filename,
        lineno=code.co_firstlineno,
        argnames=args,
        has_self=has_self and names[0] == "self",
        ignores_args=ignores_arguments(code, args),
    )


# Builtins that read a frame's locals without naming them: a body calling one may read its arguments.
_READS_LOCALS = frozenset({"locals", "vars", "eval", "exec", "dir"})


def ignores_arguments(code: CodeType, args: tuple[str, ...]) -> bool:
    """Whether the body never reads any of `args`: a call to it can hand nothing over.

    A disabled tracker's `log(self, data, step=None): pass`, a null writer's
    `add_scalar(self, *args, **kwargs): pass`: the payload they are given is
    dropped on the spot. Read from the bytecode once per code object: an
    argument loaded (`LOAD_FAST*`), kept for a nested function (a cell), or
    reachable through `locals()`/`eval` counts as read.
    """
    if not args or set(args) & set(code.co_cellvars) or _READS_LOCALS & set(code.co_names):
        return False
    wanted = set(args)
    for ins in dis.get_instructions(code):
        if ins.opname.startswith(("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "STORE_FAST_LOAD_FAST")):
            value = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
            if wanted.intersection(value):
                return False
    return True
