"""Run the `flowmap` CLI as a user would: a fresh interpreter, output captured.

A plain module (tests/ is on sys.path through its conftest) so module-scoped
fixtures can import it; tests take it as the `run_cli` fixture.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence


def run_cli(args: Sequence[str], cwd: str | os.PathLike[str] | None = None,
            timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`flowmap ARGS` in a fresh interpreter, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "flowmap", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )
