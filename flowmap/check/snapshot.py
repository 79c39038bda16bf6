"""A snapshot: the per-seam figures a baseline keeps, and what both sides of a comparison are.

`check` compares a run's snapshot to a baseline file's; `diff` compares two
snapshots (each from a run or a baseline file). Keeping one shape for all of
them means one comparison engine and one set of words for every output.
Figures are rounded here, once, so a baseline re-recorded from the same run is
byte-identical (diff-friendly) and comparisons never see float noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flowmap.model.format import as_shape, leaf_label, seam_label
from flowmap.model.types import ARRAY_KINDS, Shape

if TYPE_CHECKING:
    from flowmap.model.types import LeafStats, SeamStats
    from flowmap.model.view import RunView


@dataclass(frozen=True, slots=True)
class LeafShot:
    """One leaf of a seam's payload: its schema and its mean size."""

    path: str
    kind: str  # tensor, ndarray, int, str, bytes, ... (see flowmap.capture.describe)
    dtype: str  # "" for Python scalars; "a|b" when hops disagreed
    shape: Shape  # per dim an int, or (min, max) when the dim varied
    dims: tuple[str, ...] | None  # dimension names given at the hop, if any
    bytes_per_hop: int  # mean over the hops that carried this leaf
    bytes_per_step: int
    # (least, largest) number of dims where hops disagreed (then `shape` is ()): a leaf whose
    # rank varies is not a 0-d one, and a baseline must not say it was
    ranks: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        # A baseline file holds JSON lists: one form (tuples) whatever the source.
        object.__setattr__(self, "shape", as_shape(self.shape))
        if self.ranks is not None:
            object.__setattr__(self, "ranks", (int(self.ranks[0]), int(self.ranks[1])))
        if self.dims is not None:
            object.__setattr__(self, "dims", tuple(self.dims) or None)

    @property
    def is_array(self) -> bool:
        """Arrays scale with the problem; scalars and strings mostly do not."""
        return self.kind in ARRAY_KINDS


@dataclass(frozen=True, slots=True)
class SeamShot:
    """One seam `src -> dst : name` summarised per step and per hop."""

    src: str
    dst: str
    name: str
    bytes_per_step: int  # mean over the run's steps
    bytes_per_hop: int  # mean over hops
    max_bytes_per_hop: int
    hops_per_step: float
    transports: list[str]
    leaves: dict[str, LeafShot] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return seam_label((self.src, self.dst, self.name))

    def leaf_label(self, path: str) -> str:
        """`batch.advantages`: the payload name, then the leaf path inside it."""
        return leaf_label(self.name, path)


@dataclass(frozen=True, slots=True)
class CounterShot:
    count: int
    min: float
    max: float
    mean: float
    last: float


@dataclass(slots=True)
class Snapshot:
    """Everything a baseline records about one run."""

    steps: int
    seams: dict[str, SeamShot]  # by label, sorted
    counters: dict[str, CounterShot] | None = None  # only when recorded with counters
    items: dict[str, Any] | None = None  # total, consumed, dropped {reason: n}
    source: str = ""  # where it came from (run path or baseline file), for messages only


def _round_sig(x: float) -> float:
    """Six significant figures: enough to read, stable across platforms."""
    return float(f"{x:.6g}")


def _leaf_shot(ls: LeafStats, num_steps: int) -> LeafShot:
    return LeafShot(
        path=ls.path,
        kind=ls.kind,
        dtype=ls.dtype,
        shape=ls.shape,
        dims=ls.dims,
        bytes_per_hop=round(ls.mean_bytes),
        bytes_per_step=round(ls.total_bytes / num_steps),
        ranks=ls.ranks,
    )


def seam_shot(s: SeamStats, num_steps: int) -> SeamShot:
    return SeamShot(
        src=s.src,
        dst=s.dst,
        name=s.name,
        bytes_per_step=round(s.bytes_per_step_mean),
        bytes_per_hop=round(s.total_bytes / s.hops) if s.hops else 0,
        max_bytes_per_hop=s.max_bytes,
        hops_per_step=round(s.hops_per_step, 3),
        transports=sorted(s.transports),
        leaves={ls.path: _leaf_shot(ls, num_steps) for ls in sorted(s.leaves, key=lambda x: x.path)},
    )


def from_run(view: RunView, *, counters: bool = False) -> Snapshot:
    """The snapshot of a run; `counters=True` adds counter and item summaries."""
    seams = {}
    for s in view.seams.values():
        shot = seam_shot(s, view.num_steps)
        seams[shot.label] = shot
    # the steps the run had: 0 for a run without any, whose "per step" figures are totals
    snap = Snapshot(steps=view.step_count, seams=dict(sorted(seams.items())), source=view.path)
    if counters:
        snap.counters = {
            c.name: CounterShot(
                count=c.count,
                min=_round_sig(c.min),
                max=_round_sig(c.max),
                mean=_round_sig(c.mean),
                last=_round_sig(c.last),
            )
            for c in view.counters.values()
        }
        it = view.items
        snap.items = {"total": it.total, "consumed": it.consumed, "dropped": dict(it.dropped)}
    return snap
