"""Start flowmap tracing in a Python child process of a traced run.

This directory is put first on PYTHONPATH by the traced parent, so Python
imports this module at start-up. It then steps aside: it takes itself off
sys.path and runs the `sitecustomize` it shadowed, if there is one, so the
user's own start-up customisation still runs.
"""

import os
import sys
from types import ModuleType


def _chain_original() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    # The import system still holds this module under the name "sitecustomize",
    # so the shadowed one runs from its spec rather than through `import`.
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


# Helper processes that Python starts and that never run the program's code: tracing
# them would cost their start-up and leave an empty shard in the run.
_HELPERS = ("from multiprocessing.resource_tracker import main",)


def _start() -> None:
    run_dir = os.environ.get("FLOWMAP_RUN_DIR")
    if not run_dir or _helper():
        return
    launch = _import_flowmap("flowmap.launch")
    if launch is not None:  # as `flowmap trace` starts: the tracer, seam maps, hooks
        launch.begin(run_dir, _process_name(), named_later=_named_later())


def _helper() -> bool:
    """Whether this process is one of `_HELPERS` (`python -c '<one of them>;main(fd)'`)."""
    argv: list[str] = getattr(sys, "orig_argv", [])
    return len(argv) >= 3 and argv[-2] == "-c" and argv[-1].startswith(_HELPERS)


# Processes multiprocessing starts from a fresh interpreter: a `spawn` child (it learns
# which `Process` it is only after start-up) and the forkserver's server (it only forks).
_SPAWN_FLAG = "--multiprocessing-fork"
_FORKSERVER = "from multiprocessing.forkserver import main"


def _named_later() -> bool:
    """Whether multiprocessing names this process after start-up (so its shard waits)."""
    argv: list[str] = getattr(sys, "orig_argv", [])
    return (len(argv) >= 2 and argv[-1] == _SPAWN_FLAG) or (
        len(argv) >= 3 and argv[-2] == "-c" and argv[-1].startswith(_FORKSERVER))


def _import_flowmap(name: str) -> ModuleType | None:
    """Import a flowmap module; from FLOWMAP_IMPORT_ROOT when this Python cannot find it."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        root = os.environ.get("FLOWMAP_IMPORT_ROOT")
        if not root:
            return None
        sys.path.append(root)
        return importlib.import_module(name)


def _process_name() -> str | None:
    """A torchrun worker is named by its rank (`rank1`), so shards say which is which."""
    if os.environ.get("TORCHELASTIC_RUN_ID") is not None and os.environ.get("RANK"):
        return f"rank{os.environ['RANK']}"
    return None


def _discover() -> None:
    """A child of `flowmap discover` (FLOWMAP_DISCOVER names its dir): watch it too."""
    if not os.environ.get("FLOWMAP_DISCOVER") or _helper():
        return
    discover = _import_flowmap("flowmap.discover.process")
    if discover is not None:
        discover.start_from_environment()


_chain_original()
try:
    _start()
except Exception as exc:  # never stop the child from running
    sys.stderr.write(f"flowmap: tracing could not start in this process ({exc}).\n")
try:
    _discover()
except Exception as exc:
    sys.stderr.write(f"flowmap: discovery could not start in this process ({exc}).\n")
