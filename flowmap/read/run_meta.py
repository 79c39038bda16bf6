"""Read `run.json`, the run's small description, without trusting it.

The file is informational (command, times, exit code): a missing one is an
empty description, and a corrupt, binary, deeply nested or non-object one is
one problem sentence in the run's health, never a reason to refuse the run.
"""

from __future__ import annotations

from flowmap.rundir import read_meta as read_run_meta

__all__ = ["read_run_meta"]
