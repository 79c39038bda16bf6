"""Shared test fixtures."""

from __future__ import annotations

import pytest
from flowmap_cli import run_cli
from golden import UPDATE_OPTION, Golden, wants_update


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(UPDATE_OPTION, action="store_true", dest="update_golden",
                     help="Rewrite golden files (those tests report as skipped, not passed).")


@pytest.fixture(name="run_cli")
def run_cli_fixture():
    """`flowmap ARGS` in a subprocess (see tests/flowmap_cli.py)."""
    return run_cli


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    """Compare an output with its golden file (see tests/golden.py)."""
    return Golden(wants_update(request.config))
