"""pytest plugin (entry point `flowmap`): trace a test body and assert seam budgets."""

from __future__ import annotations

from typing import Any


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        "flowmap_budget(seam, max_bytes_per_hop=None, max_bytes_per_step=None): "
        "trace the test and fail if the seam's payload exceeds the budget",
    )
