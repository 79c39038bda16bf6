"""How the traced program ended, and how long it ran, from run.json.

A run whose program crashed or was interrupted still holds every hop recorded
before that, and reads like a finished one; the outputs must say it did not
finish. The wall time is the program's own (started to finished), not the span
of its hops: a run that recorded nothing still ran for its seconds.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SIGINT_EXIT = 128 + signal.SIGINT  # 130: what a shell reports for Ctrl-C, and what `trace` returns


@dataclass(frozen=True, slots=True)
class Ending:
    """The program's exit code (None when run.json does not say) and its wall time in seconds."""

    exit_code: int | None
    wall_s: float | None

    @property
    def failed(self) -> bool:
        """The program did not exit 0: crashed, exited non-zero, interrupted or killed."""
        return self.exit_code is not None and self.exit_code != 0

    @property
    def sentence(self) -> str:
        """`the program exited 0`, `the program failed (exit code 1)`, ...; "" when not recorded."""
        code = self.exit_code
        if code is None:
            return ""
        if code == 0:
            return "the program exited 0"
        if code == SIGINT_EXIT:
            return f"the program was interrupted (Ctrl-C, exit code {code})"
        if 128 < code < 128 + signal.NSIG:
            try:
                name = signal.Signals(code - 128).name
            except ValueError:
                name = f"signal {code - 128}"
            return f"the program was killed by {name} (exit code {code})"
        return f"the program failed (exit code {code})"


def read_ending(meta: Mapping[str, Any]) -> Ending:
    """The ending that run.json's fields describe; a missing or odd field is None, never an error."""
    code = meta.get("exit_code")
    started, finished = meta.get("started_wall_ns"), meta.get("finished_wall_ns")
    wall = None
    if type(started) is int and type(finished) is int and finished >= started:
        wall = (finished - started) / 1e9
    return Ending(code if type(code) is int else None, wall)
