"""Ray hops named by what moved their bytes: inline in the call, the node's object store, or
a transfer from another node.

At capture a Ray hop is labelled by the call (flowmap/integrations/ray_callee.py):
an argument passed inline is `rpc`, one passed by ObjectRef is `shm`. What moved
the bytes depends on facts the recording process does not have in hand — but
the run does, once every Ray process has said which node it is on and which
owners run in it (`i` events, flowmap/integrations/ray_node.py):

- Ray sends a value inline in the call's message only up to `INLINE_MAX_BYTES`
  (Ray's `max_direct_call_object_size`); a larger argument or return value is
  put into the object store, so an `rpc` hop above it moved through shared
  memory (`shm`) — or over the network, below;
- when the owner that sent the bytes and the owner that received them ran on
  different Ray nodes (as their processes said; an owner that did not say is
  taken to run where the hop was recorded), the object was pulled across
  nodes: `net`.

An `rpc` hop at or below the limit stays `rpc`, across nodes too: the value rode
inside the call's own message. A hop into `object_store` (`ray.put`) is
recorded by its sender and stays as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowmap.read.events import Shard
from flowmap.trace_format import RPC, SHM

INLINE_MAX_BYTES = 100 * 1024  # Ray's max_direct_call_object_size (default)
CROSS_NODE = "net"  # an object pulled from another node's object store
OBJECT_STORE_OWNER = "object_store"


def name_ray_transports(shards: Sequence[Shard]) -> None:
    """Rename, in place, the transport of each Ray hop by what moved its bytes."""
    node_of_pid = {s.pid: s.info["ray_node_id"] for s in shards if s.info.get("ray_node_id")}
    if not node_of_pid:
        return
    owner_nodes: dict[str, set[str]] = {}
    for s in shards:
        node = node_of_pid.get(s.pid)
        if node:
            for owner in s.owners:
                owner_nodes.setdefault(owner, set()).add(node)
    for s in shards:
        here = node_of_pid.get(s.pid)
        if here is None:
            continue
        for h in s.hops:
            if h.transport not in (RPC, SHM) or h.dst == OBJECT_STORE_OWNER:
                continue
            if h.transport == "rpc" and h.nbytes <= INLINE_MAX_BYTES:
                continue
            # each side's node as its processes said, else the recording process's (the
            # callee records its arguments, the caller what it fetched; verl's dispatch
            # records on the sending side)
            sent = owner_nodes.get(h.src) or {here}
            got = owner_nodes.get(h.dst) or {here}
            h.transport = CROSS_NODE if not sent & got else "shm"
