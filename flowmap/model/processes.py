"""The run's processes, and which of them each owner ran in.

An owner's process is not the recording process of its hops: a Ray driver
records the values its actors return (`Rollout/1 -> driver`, in the driver),
an actor records the calls it receives. So where an owner said where it runs
(an `i owner` event: a Ray actor as it starts, the driver as it connects),
that is its process; otherwise the processes that sent from it or recorded
counters for it, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from flowmap.model.types import Process
from flowmap.read.events import Shard


def processes(shards: Sequence[Shard]) -> tuple[Process, ...]:
    """One record per process (shards of one process joined), by host, then pid."""
    by_pid: dict[int, Process] = {}
    for s in shards:
        if s.empty:
            continue
        was = by_pid.get(s.pid)
        owners = tuple(dict.fromkeys([*(was.owners if was else ()), *s.owners]))
        by_pid[s.pid] = Process(
            s.pid, s.os_pid or s.pid, s.host_label or s.host or "host",
            (was.name if was else None) or s.process,
            (was.ray_node if was else None) or s.info.get("ray_node_id"), owners)
    return tuple(sorted(by_pid.values(), key=lambda p: (p.host, p.os_pid, p.pid)))


def declared_owners(shards: Iterable[Shard]) -> dict[str, set[int]]:
    """`owner -> pids` of the processes that said the owner runs there."""
    out: dict[str, set[int]] = {}
    for s in shards:
        for owner in s.owners:
            out.setdefault(owner, set()).add(s.pid)
    return out


def place_owners(shards: Sequence[Shard], names: Iterable[str], sent: Mapping[str, set[int]],
                 received: Mapping[str, set[int]]) -> dict[str, set[int]]:
    """`owner -> pids` it ran in: where it said it runs; else, of the processes that sent
    from it or recorded its counters (`sent`), those where no other owner said it runs;
    else the unclaimed processes that recorded hops to it (a Ray driver connected before
    tracing began records what its actors return); else all of `sent`."""
    declared = declared_owners(shards)
    claimed = set().union(*declared.values()) if declared else set()
    out = {}
    for name in names:
        evidence = sent.get(name, set())
        out[name] = (declared.get(name) or evidence - claimed
                     or (received.get(name, set()) - claimed if claimed else set()) or evidence)
    return out


def hosts_of(pids: Iterable[int], shards: Iterable[Shard]) -> tuple[str, ...]:
    """The hosts (as the run names them) of `pids`, sorted."""
    host: Mapping[int, str] = {s.pid: s.host_label or s.host or "host" for s in shards}
    return tuple(sorted({host[p] for p in pids if p in host}))


def places(shards: Sequence[Shard]) -> dict[int, tuple[int, str]]:
    """`pid -> (os pid, where)`: `where` is ` on HOST` where the run has several hosts, and
    `, Ray node ID8` where it has several Ray nodes (Perfetto's process labels)."""
    hosts = {s.host_label or s.host for s in shards}
    nodes = {s.info.get("ray_node_id") for s in shards} - {None}
    out = {}
    for s in shards:
        node = s.info.get("ray_node_id")
        at = f" on {s.host_label or s.host}" if len(hosts) > 1 else ""
        at += f", Ray node {node[:8]}" if node and len(nodes) > 1 else ""
        out[s.pid] = (s.os_pid or s.pid, at)
    return out
