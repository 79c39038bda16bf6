"""Which shards are one host, which are one process, and a run-unique number for each process.

A shard's header names its process (flowmap/capture/identity.py). Read back:
a host is `(host, boot_id, pid_ns)` — two containers on one kernel, each
with its pid 1 and perhaps the same hostname, are two hosts — and a process
is its host, its pid and its start (`start_ticks`; a process that wrote two
shards is one process). Shards of an older writer lack these fields: they
are told apart by hostname and pid, as before.

Every record carries its process as a number (`Hop.pid` and the like): the
pid, unless another process of the run has the same one, in which case the
later one is numbered `pid + k * PID_SPAN` (past any real pid), so flow,
findings and Perfetto keep them apart. Its real pid stays `Shard.os_pid`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PID_SPAN = 1 << 22  # above Linux's largest pid (pid_max <= 2**22)

HostKey = tuple[str, str, int, str]


def host_key(header: Mapping[str, Any]) -> HostKey:
    """The host a shard's header names: hostname, boot id and pid namespace (and the tag
    `merge` gives a host it found to be two, `flowmap.read.merge`)."""
    boot, ns, tag = header.get("boot_id"), header.get("pid_ns"), header.get("host_tag")
    return (str(header.get("host") or ""), boot if type(boot) is str else "",
            ns if type(ns) is int else 0, tag if type(tag) is str else "")


def process_key(header: Mapping[str, Any]) -> tuple[HostKey, int, int | str]:
    """The process a shard's header names: its host, pid, and start (or its random id)."""
    pid = header.get("pid")
    start = header.get("start_ticks")
    if type(start) is not int:
        start = header.get("run_process") if header.get("boot_id") else 0
    return host_key(header), pid if type(pid) is int else 0, start if start is not None else 0


def host_labels(headers: Sequence[Mapping[str, Any]]) -> dict[HostKey, str]:
    """Each host's name in the run: its hostname, with `#N` where distinct hosts share one
    (numbered in order of their earliest shard)."""
    first: dict[HostKey, int] = {}
    for h in headers:
        key = host_key(h)
        t = h.get("t0_wall_ns")
        t = t if type(t) is int else 0
        first[key] = min(first.get(key, t), t)
    by_name: dict[str, list[HostKey]] = {}
    for key in sorted(first, key=lambda k: (first[k], k)):
        by_name.setdefault(key[0] or "host", []).append(key)
    out = {}
    for name, keys in by_name.items():
        for i, key in enumerate(keys, start=1):
            out[key] = name if len(keys) == 1 else f"{name}#{i}"
    return out


def run_pids(headers: Sequence[Mapping[str, Any]]) -> list[int]:
    """The number of each shard's process in the run (module docstring), in `headers` order."""
    order = sorted(range(len(headers)), key=lambda i: (_wall(headers[i]), i))
    taken: dict[int, tuple[HostKey, int, int | str]] = {}
    mine: dict[tuple[HostKey, int, int | str], int] = {}
    out = [0] * len(headers)
    for i in order:
        key = process_key(headers[i])
        if key not in mine:
            n = key[1]
            while n in taken and taken[n] != key:
                n += PID_SPAN
            taken[n] = key
            mine[key] = n
        out[i] = mine[key]
    return out


def _wall(h: Mapping[str, Any]) -> int:
    t = h.get("t0_wall_ns")
    return t if type(t) is int else 0
