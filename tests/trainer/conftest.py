"""One torch thread for every trainer test.

Tiny matmuls gain nothing from a second intra-op thread, and on a shared 2-core
box two spinning threads stall 10-20x whenever another process takes a core.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
