"""Start a corpus script's ranks: `spawn(run, world)` runs `run(rank, port)` in `world`
spawned processes that meet over gloo on a free loopback port, as torchrun would.

Not a case itself (it has no `EXPECT`): the torch.distributed scripts of the corpus share
it, so each keeps only the pattern it reproduces.
"""

from __future__ import annotations

import multiprocessing as mp
import socket
from collections.abc import Callable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(run: Callable[[int, int], None], world: int) -> None:
    port = free_port()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=run, args=(rank, port)) for rank in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
