"""Every process by its name: the default owner of a multiprocessing child.

A program that names nothing still has processes a reader tells apart: the
rollout worker, the scorer, the learner. Without a name of their own they would
all be `main`, one node, and a scorer's 32-byte replies would share a seam with
12 KB trajectories. So, when the program sets no owner, a child started through
`multiprocessing` (or `torch.multiprocessing`) takes, as its default owner:

- the name it was given (`Process(name="scorer")`);
- else its target's name (`rollout_worker`), or its class's for a `Process`
  subclass with its own `run` (`Learner`);
- a torch DataLoader's worker: its Dataset's class and its number (`Prompts/0`);
- a pool worker: its pool and its number in it (`pool/0`, `pool/1`; a second
  pool of the same parent `pool1/0`), a `ProcessPoolExecutor` worker
  `process_pool/0`; a `torch.multiprocessing.spawn` rank its function and
  index (`rank_main/1`);
- a second child of the same name from one parent gets a number
  (`rollout_worker`, `rollout_worker/1`, ...), so two processes never merge
  into one node unless the program names them alike.

The name is chosen in the parent as it starts the child (creation order makes
it stable across runs) and carried on the `Process` object, which every start
method hands to the child; the child takes it in `_bootstrap`, before the
target runs, and drops an owner block inherited through `fork`. The main
process stays `main`; `init_process_group` still makes such a child `rank<N>`
(`flowmap.set_owner` and `flowmap.owner` override all of this).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from flowmap.capture import importhook, session, state

_DEFAULT = re.compile(r"^[A-Za-z_]\w*-\d+(:\d+)*$")  # multiprocessing's own `Process-3`
_taken: dict[str, int] = {}  # in the parent: children started per name
_pools: dict[tuple[str, int], tuple[int, int]] = {}  # (kind, id(pool queue)) -> (pool, workers)
#: The names given to DataLoader workers started here: hops they make are the loader's
#: plumbing, not the program's own instrumentation (`flowmap.discover.auto`).
loader_workers: set[str] = set()


@importhook.once
def install(module: Any) -> None:
    """Patch `multiprocessing.process.BaseProcess` (start in the parent, bootstrap in the child)."""
    cls = module.BaseProcess
    cls.start = _wrap_start(cls.start)
    cls._bootstrap = _wrap_bootstrap(cls._bootstrap)


def _wrap_start(start: Any) -> Any:
    @functools.wraps(start)
    def flowmap_start(self: Any, *args: Any, **kwargs: Any) -> Any:
        if state.tracer is not None and getattr(self, "_flowmap_owner", None) is None:
            try:
                self._flowmap_owner = owner_of(self)
            except Exception as exc:
                state.tracer.error(exc)
        return start(self, *args, **kwargs)

    return flowmap_start


def _wrap_bootstrap(bootstrap: Any) -> Any:
    @functools.wraps(bootstrap)
    def flowmap_bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self, "_flowmap_owner", None)
        if type(name) is str:
            state.default_owner = name
            state.auto_owner = True
            state.current_owner.set(None)  # an owner block of the parent, inherited by fork
            session.process_named()  # a spawned child's shard header takes the name
        return bootstrap(self, *args, **kwargs)

    return flowmap_bootstrap


def owner_of(process: Any) -> str:
    """The default owner of a child about to start (in the parent)."""
    base = _base_name(process)
    if "/" in base:
        return base  # numbered already (pool, spawn rank)
    n = _taken.get(base, 0)
    _taken[base] = n + 1
    return base if n == 0 else f"{base}/{n}"


def _base_name(process: Any) -> str:
    name = str(getattr(process, "_name", "") or "")
    target = getattr(process, "_target", None)
    args: Any = getattr(process, "_args", ()) or ()
    module = getattr(target, "__module__", "") or ""
    fn_name = getattr(target, "__name__", "") or ""
    if module == "multiprocessing.pool" and fn_name == "worker":
        return _pool_member("pool", args)
    if module == "concurrent.futures.process" and fn_name == "_process_worker":
        return _pool_member("process_pool", args)
    if module == "torch.utils.data._utils.worker" and fn_name == "_worker_loop" and len(args) > 10:
        return _loader_worker(args[1], args[10])
    if module == "torch.multiprocessing.spawn" and fn_name == "_wrap" and len(args) >= 2:
        fn = getattr(args[0], "__name__", None)
        if isinstance(fn, str) and isinstance(args[1], int):
            return f"{fn}/{args[1]}"
    if name and not _DEFAULT.match(name):
        return name  # given by the program
    if target is not None:
        while isinstance(target, functools.partial):
            target = target.func
        fn = getattr(target, "__name__", None)
        if isinstance(fn, str) and fn.isidentifier():
            return fn
    cls: Any = type(process)
    if cls.run is not _base_run(cls):
        return str(cls.__name__)  # a Process subclass with its own run
    return name or "process"


def _loader_worker(dataset: Any, worker_id: Any) -> str:
    """`Prompts/0`: a DataLoader's worker by the Dataset the program wrote (torch's wrappers,
    `Subset` and the like, unwrapped), and its number; a plain list's loader `DataLoader/0`.
    Named after torch's `_worker_loop` it would stand first in the flow, a stage the script
    never wrote."""
    for _ in range(4):
        inner = getattr(dataset, "dataset", None)
        if not type(dataset).__module__.startswith("torch.") or inner is None:
            break
        dataset = inner
    cls = type(dataset)
    user = not cls.__module__.startswith(("torch.", "builtins", "collections"))
    name = cls.__name__ if user and cls.__name__.isidentifier() else "DataLoader"
    number = worker_id if isinstance(worker_id, int) else 0
    loader_workers.add(f"{name}/{number}")
    return f"{name}/{number}"



def _base_run(cls: Any) -> Any:
    for klass in cls.__mro__:
        if klass.__module__ == "multiprocessing.process" and klass.__name__ == "BaseProcess":
            return klass.run
    return None


def _pool_member(kind: str, args: Any) -> str:
    """`pool/3`: the pool is known by its task queue, the first argument of its workers."""
    key = (kind, id(args[0]) if args else 0)
    pool, workers = _pools.get(key) or (sum(1 for k in _pools if k[0] == kind), 0)
    _pools[key] = (pool, workers + 1)
    return f"{kind if pool == 0 else f'{kind}{pool}'}/{workers}"
