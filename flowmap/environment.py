"""Every `FLOWMAP_*` environment variable, and the one module that reads them.

A run's processes tell each other what to do through the environment:
`flowmap trace`, `tracing()` and the Ray integration set these for the
processes they start, and each process reads them here. The one other reader
is the boot module (`flowmap/launch/boot/sitecustomize.py`): it runs at the
start of every Python child and reads `RUN_DIR`, `IMPORT_ROOT` and `DISCOVER`
with `os` alone, so that a child that is not traced never imports
flowmap at all.
"""

from __future__ import annotations

import os

RUN_DIR = "FLOWMAP_RUN_DIR"  # the run directory a process traces into
IMPORT_ROOT = "FLOWMAP_IMPORT_ROOT"  # where a child imports flowmap from
SEAMS = "FLOWMAP_SEAMS"  # seam map files, joined by os.pathsep
TRANSPORTS = "FLOWMAP_TRANSPORTS"  # the transports recorded (dist, mp, zmq; "all" or unset: all)
AGGREGATE = "FLOWMAP_AGGREGATE"  # fold hops past a detail window of this many steps
FLIGHT_RECORDER = "FLOWMAP_FLIGHT_RECORDER"  # read NCCL's flight recorder (on unless 0/off)
DISCOVER = "FLOWMAP_DISCOVER"  # the directory of a discovery run
DISCOVER_KEEP = "FLOWMAP_DISCOVER_KEEP"  # a folder where `flowmap discover` keeps every record
PURE_PYTHON = "FLOWMAP_PURE_PYTHON"  # set: the C accelerators are never loaded
RUNS = "FLOWMAP_RUNS"  # where unnamed runs go (a Ray Job's entrypoint: docs/distributed.md)
VALUES = "FLOWMAP_VALUES"  # "1": `trace --values` samples values (docs/findings.md)
NAMES = (RUN_DIR, IMPORT_ROOT, SEAMS, TRANSPORTS, AGGREGATE, FLIGHT_RECORDER, DISCOVER,
         DISCOVER_KEEP, PURE_PYTHON, RUNS, VALUES)


def get(name: str, default: str | None = None) -> str | None:
    """The variable `name` (one of `NAMES`) as this process's environment has it now."""
    return os.environ.get(name, default)


def pure_python() -> bool:
    """Whether the C accelerators are off (`FLOWMAP_PURE_PYTHON` set to anything)."""
    return bool(os.environ.get(PURE_PYTHON))
