"""Shared test helpers: run the CLI as a user would, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

import pytest


def run_cli(args: Sequence[str], cwd: str | os.PathLike[str] | None = None,
            timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`flowmap ARGS` in a fresh interpreter, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "flowmap", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(name="run_cli")
def run_cli_fixture():
    """The `run_cli` helper, as a fixture (test folders are not packages)."""
    return run_cli
