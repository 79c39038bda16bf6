"""Where a Ray owner runs: its process says so once, with the Ray node it is on.

The hops of a Ray call are recorded where the values are real — the callee
records what it received, the caller what it got back — so no hop says which
process an owner lives in. Each worker (and the driver, once connected) says
it: an `owner` info event per owner that runs in it, and a `ray_node_id` info
event once (`trace_format`). Reports give owners their own pids and hosts
from these (`flowmap.model.processes`), and the Ray node ids tell the nodes
of one cluster apart where the hostnames are the same.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from flowmap.capture import forksafe, state

MAX_OWNERS = 256  # owners one process says it runs (tasks of many functions share workers)

_said: set[str] = set()
_node_said = False


def here(owner: str | None) -> None:
    """Say, once per process, that `owner` runs here, and on which Ray node."""
    global _node_said
    t = state.tracer
    if t is None or not owner or owner in _said or len(_said) >= MAX_OWNERS:
        return
    info = getattr(t, "info", None)
    if info is None:
        return
    try:
        _said.add(owner)
        if not _node_said:
            _node_said = True
            node = _node_id()
            if node:
                info("ray_node_id", node)
        info("owner", owner)
    except Exception:
        pass


def _node_id() -> str | None:
    ray: Any = sys.modules.get("ray")
    try:
        node = ray.get_runtime_context().get_node_id() if ray is not None else None
    except Exception:
        return None
    return node if isinstance(node, str) else None


def forget() -> None:
    """A forked child is another process: it says it all again."""
    global _node_said
    _said.clear()
    _node_said = False


if hasattr(os, "register_at_fork"):
    forksafe.at_fork(after_in_child=forget)
