"""Capture of the transports programs use without any flowmap code.

- `dist`: torch.distributed collectives and point-to-point calls (`dist.py`);
- `mp`: multiprocessing / torch.multiprocessing queues and pipes (`mp.py`);
- `zmq`: pyzmq sockets (`zmq.py`);
- `cuda_ipc`: CUDA tensors shared by IPC handle, from torch's own reductions (`cuda_ipc.py`);
- `queue`: `queue.Queue` and `asyncio.Queue` between threads and tasks of one process
  (`thread_queue.py`).

Each is installed by the patch-on-import hook when the program imports the
library, so a `from torch.distributed import all_reduce` made afterwards
already gets the instrumented function. Which ones are on is read from
`FLOWMAP_TRANSPORTS` (a comma list, `none`, or unset for all), in every
process, so traced children obey the switch their parent got
(`flowmap trace --no-transport mp,zmq`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from types import ModuleType

from flowmap import environment
from flowmap.capture import importhook

ENV = environment.TRANSPORTS
NAMES = ("dist", "mp", "zmq", "cuda_ipc", "queue")


def enabled(value: str | None = None) -> set[str]:
    """The transports `FLOWMAP_TRANSPORTS` (or `value`) turns on; unknown names are warned about."""
    raw = environment.get(ENV) if value is None else value
    if raw is None or raw.strip() in ("", "all"):
        return set(NAMES)
    names = {n.strip() for n in raw.split(",") if n.strip()} - {"none"}
    unknown = names - set(NAMES)
    if unknown:
        sys.stderr.write(f"flowmap: {ENV} names unknown transports ({', '.join(sorted(unknown))}); "
                         f"known: {', '.join(NAMES)}.\n")
    return names & set(NAMES)


def without(off: Iterable[str], value: str | None = None) -> str:
    """The `FLOWMAP_TRANSPORTS` value that turns `off` off (`all` turns every one off)."""
    off = {n.strip() for item in off for n in item.split(",") if n.strip()}
    if "all" in off:
        return "none"
    unknown = off - set(NAMES)
    if unknown:
        raise ValueError(f"unknown transport {', '.join(sorted(unknown))}; "
                         f"choose from {', '.join(NAMES)} or all")
    on = [n for n in NAMES if n in enabled(value) and n not in off]
    return ",".join(on) or "none"


def install_hooks() -> None:
    """Arm the hooks of the transports that are on."""
    on = enabled()
    if "dist" in on:
        importhook.on_import("torch.distributed.distributed_c10d", _dist)
    if "mp" in on:
        importhook.on_import("multiprocessing.queues", _mp_queues)
        importhook.on_import("multiprocessing.connection", _mp_connection)
        importhook.on_import("multiprocessing.pool", _mp_pool)
        importhook.on_import("concurrent.futures.process", _process_pool)
    if "zmq" in on:
        importhook.on_import("zmq.sugar.socket", _zmq)
    if "cuda_ipc" in on:
        importhook.on_import("torch.multiprocessing.reductions", _cuda_ipc)
    if "queue" in on:
        importhook.on_import("queue", _queue)
        importhook.on_import("asyncio.queues", _asyncio_queues)


def _dist(module: ModuleType) -> None:
    from flowmap.integrations.transports import dist

    dist.install(module)


def _mp_queues(module: ModuleType) -> None:
    from flowmap.integrations.transports import mp

    mp.install_queues(module)


def _mp_connection(module: ModuleType) -> None:
    from flowmap.integrations.transports import mp

    mp.install_connection(module)


def _mp_pool(module: ModuleType) -> None:
    from flowmap.integrations.transports import mp_pool

    mp_pool.install(module)


def _process_pool(module: ModuleType) -> None:
    from flowmap.integrations.transports import mp_pool

    mp_pool.install_executor(module)


def _zmq(module: ModuleType) -> None:
    from flowmap.integrations.transports import zmq

    zmq.install(module)


def _cuda_ipc(module: ModuleType) -> None:
    from flowmap.integrations.transports import cuda_ipc

    cuda_ipc.install(module)


def _queue(module: ModuleType) -> None:
    from flowmap.integrations.transports import thread_queue

    thread_queue.install_queue(module)


def _asyncio_queues(module: ModuleType) -> None:
    from flowmap.integrations.transports import thread_queue

    thread_queue.install_asyncio(module)
