"""Who this process is, wherever its shard ends up: host, pid and start, told apart for good.

A pid alone names a process only within one pid namespace at one time:
containers make every main process pid 1, and hostnames repeat across
clusters. So a shard's header also records what makes the pair unique:

- `boot_id`: the kernel's id of this boot (`/proc/sys/kernel/random/boot_id`);
  processes with the same one share the monotonic clock;
- `pid_ns`: the inode of this process's pid namespace (two containers on one
  kernel differ here, and their pids may both be 1);
- `start_ticks`: the process's start time in clock ticks since boot
  (`/proc/self/stat`), which tells a reused pid from the process before it;
- `run_process`: random bytes drawn when the shard opens, the last resort
  where /proc is missing (another OS, a sandbox);
- `ray_node_id`: in a Ray worker, the node its raylet runs on (its
  `--node-id` argument).

A host is `(host, boot_id, pid_ns)`; a process is a host plus `pid` and
`start_ticks` (`flowmap.read.identity` reads them back). Each field is read
once per shard, with plain file reads: no import, a few microseconds.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def _read(path: str, limit: int = 4096) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("ascii", "replace").strip()
    except OSError:
        return ""


def _start_ticks() -> int | None:
    stat = _read("/proc/self/stat")
    # field 22 (starttime), counted after the command, which is in parentheses and may hold spaces
    rest = stat.rpartition(")")[2].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


def _pid_namespace() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _ray_node() -> dict[str, str]:
    """A Ray worker's node id, from the command line its raylet started it with; a driver
    learns its own once connected (`flowmap.integrations.ray_node`, an `i` event)."""
    for arg in sys.argv[1:64]:
        if type(arg) is str and arg.startswith("--node-id=") and len(arg) < 200:
            return {"ray_node_id": arg[len("--node-id="):]}
    return {}


def process_identity() -> dict[str, Any]:
    """The header fields that name this process uniquely (module docstring)."""
    return {
        "boot_id": _read("/proc/sys/kernel/random/boot_id", 64) or None,
        "pid_ns": _pid_namespace(),
        "start_ticks": _start_ticks(),
        "run_process": os.urandom(8).hex(),
        **_ray_node(),
    }
