"""Per-seam figures of a run, computed straight from the reader's records.

The tests of `trace --aggregate` compare a full trace with an aggregated one
of the same workload. They compute the figures here, from `Hop`s and
`SeamStep`s as read, independently of the model code that turns them into a
`Run`, so that an error there cannot hide one in capture.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from flowmap.read.events import Shard
from flowmap.read.records import Records
from flowmap.trace_format import DETAIL_HOPS


def read_run_shards(path: str, window: int | None = DETAIL_HOPS) -> tuple[list[Shard], list[str]]:
    """A finished run's shards and problems, as `flowmap.load` reads them."""
    rec = Records.read(path, window)
    return rec.shards, rec.problems


@dataclass
class Figures:
    hops: int = 0
    bytes_total: int = 0
    bytes_min: int | None = None
    bytes_max: int = 0
    items: int = 0
    by_step: dict[Any, int] = field(default_factory=lambda: defaultdict(int))
    hops_by_step: dict[Any, int] = field(default_factory=lambda: defaultdict(int))
    versions: set[Any] = field(default_factory=set)  # (min, max) over the seam
    shapes: dict[str, Any] = field(default_factory=dict)  # leaf path -> dims' [lo, hi]

    def add(self, n: int, total: int, lo: int, hi: int, items: int, step: Any,
            vlo: Any, vhi: Any, leaves: Any) -> None:
        self.hops += n
        self.bytes_total += total
        self.bytes_min = lo if self.bytes_min is None else min(self.bytes_min, lo)
        self.bytes_max = max(self.bytes_max, hi)
        self.items += items
        self.by_step[step] += total
        self.hops_by_step[step] += n
        for v in (vlo, vhi):
            if v is not None:
                self.versions.add(v)
        for leaf in leaves:
            dims = [(d, d) if type(d) is int else tuple(d) for d in leaf.shape]
            old = self.shapes.get(leaf.path)
            if old is not None and len(old) == len(dims):
                dims = [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(old, dims)]
            self.shapes[leaf.path] = dims

    def summary(self) -> dict[str, Any]:
        return {"hops": self.hops, "bytes": self.bytes_total, "min": self.bytes_min,
                "max": self.bytes_max, "items": self.items, "by_step": dict(self.by_step),
                "hops_by_step": dict(self.hops_by_step),
                "versions": (min(self.versions), max(self.versions)) if self.versions else None,
                "shapes": self.shapes}


def seam_figures(run_dir: str | os.PathLike[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per seam (src, dst, name): hops, bytes (total, min, max, per step), items, versions."""
    shards, problems = read_run_shards(os.fspath(run_dir))
    assert not [p for p in problems if "bad line" in p], problems
    out: dict[tuple[str, str, str], Figures] = defaultdict(Figures)
    for sh in shards:
        for h in sh.hops:
            out[h.seam].add(1, h.nbytes, h.nbytes, h.nbytes, len(h.items), h.step, h.version,
                            h.version, h.leaves)
        for s in sh.seam_steps:
            out[s.seam].add(s.hops, s.nbytes_sum, s.nbytes_min, s.nbytes_max, s.num_items,
                            s.step, s.version_min, s.version_max, s.leaves)
    return {seam: f.summary() for seam, f in out.items()}


def seam_steps(run_dir: str | os.PathLike[str]) -> list[Any]:
    shards, _ = read_run_shards(os.fspath(run_dir))
    return [s for sh in shards for s in sh.seam_steps]


def detail_hops(run_dir: str | os.PathLike[str]) -> list[Any]:
    shards, _ = read_run_shards(os.fspath(run_dir))
    return [h for sh in shards for h in sh.hops]
