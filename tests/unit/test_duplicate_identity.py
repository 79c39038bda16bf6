"""`duplicate` on sound identity: the same tensors to several destinations, not a view of them.

GIVEN hops traced through `flowmap.hop` (by a transport that copies, `pickle`),
WHEN the same tensors leave for several destinations in one step, or a tensor and a view
that starts where it starts, or fresh tensors at a reused address,
THEN only the first is a duplicate.
"""

from __future__ import annotations

import gc
from pathlib import Path

import torch

import flowmap
from flowmap.findings import findings


def _duplicates(run_dir: Path) -> list:  # type: ignore[type-arg]
    return [f for f in findings(flowmap.load(str(run_dir)).view) if f.kind == "duplicate"]


def test_the_same_batch_to_every_rank_is_a_duplicate(tmp_path: Path) -> None:
    with flowmap.tracing(tmp_path / "run"):
        for s in range(3):
            flowmap.step(s)
            batch = {"ids": torch.zeros(64, 256, dtype=torch.int64)}
            for r in range(4):
                flowmap.hop("driver", f"rank{r}", batch, name="batch", transport="pickle")
    (f,) = _duplicates(tmp_path / "run")
    assert f.bytes_per_step == 3 * 64 * 256 * 8


def test_a_view_that_starts_where_its_base_starts_is_not_the_same_data(tmp_path: Path) -> None:
    with flowmap.tracing(tmp_path / "run"):
        for s in range(3):
            flowmap.step(s)
            batch = torch.zeros(64, 256, dtype=torch.int64)
            flowmap.hop("driver", "rank0", {"ids": batch[:16]}, name="batch", transport="pickle")
            flowmap.hop("driver", "logger", {"ids": batch}, name="batch", transport="pickle")
    assert _duplicates(tmp_path / "run") == []


def test_fresh_groups_at_a_reused_address_are_not_duplicates(tmp_path: Path) -> None:
    # a stream of one message per group, each group freed before the next is made
    with flowmap.tracing(tmp_path / "run"):
        flowmap.step(0)
        for g in range(16):
            group = {"ids": torch.full((8, 128), g, dtype=torch.int64)}
            flowmap.hop("rollout", f"worker{g % 2}", group, name="group", transport="pickle")
            del group
            gc.collect()
    assert _duplicates(tmp_path / "run") == []
