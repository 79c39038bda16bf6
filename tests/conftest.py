"""Shared test fixtures."""

from __future__ import annotations

import pytest
from flowmap_cli import run_cli


@pytest.fixture(name="run_cli")
def run_cli_fixture():
    """`flowmap ARGS` in a subprocess (see tests/flowmap_cli.py)."""
    return run_cli
