"""A driver that hands one batch to many stages: `main` calls 14 checks on it, then merges them.

Drawn as seams this is a star of 30 edges around `main`; the picture must draw
`main` as the one driver it is, not as the hub of everything.
"""

from __future__ import annotations

import sys

import torch

import flowmap

CHECKS = 14


def make_check(i: int):
    @flowmap.seam(f"check_{i:02d}")
    def check(batch: torch.Tensor) -> torch.Tensor:
        return batch[:, i % batch.shape[1]].mean(0, keepdim=True) * (i + 1)
    return check


@flowmap.seam("make_batch")
def make_batch(step: int) -> torch.Tensor:
    return torch.full((16, 8), float(step))


@flowmap.seam("merge")
def merge(results: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat(results)


def main(steps: int) -> None:
    checks = [make_check(i) for i in range(CHECKS)]
    for step in range(steps):
        flowmap.step(step)
        batch = make_batch(step)
        merge([check(batch) for check in checks])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
