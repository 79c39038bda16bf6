"""`RunView`: the one read model between a trace and every output.

memray aggregates once and lets each reporter read the result; this is that
result for flowmap. `build_view(run)` (or `run.view`) computes the seams,
owners, counters, items and totals once, from the run's records and
aggregates, and keeps no pointer back to the run; the parts only some outputs
read — the pipeline (owner and role level), step bins — are computed from the
view's own figures and events on first use and then kept, so `report --json`
never pays for a layout's residency series. Findings are computed over the
view, by `flowmap.findings`, the layer above. Every output is one function of a
`RunView`: the terminal report, `report --json` (`to_document`), DOT, HTML,
Perfetto, the check snapshot. None of them aggregates on its own, and none of
them reads networkx: `flowmap.model.graph` builds a networkx graph from the
view for those who want one.

`events` is the run's time-ordered records, for the outputs that draw events
rather than figures (the Perfetto timeline) and for the findings detectors
that follow storages and items hop by hop. Past a long run's detail window
hops are folded per seam and step (`events.seam_steps`); `detail` says which
part was kept one by one, the part those detectors read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter

from flowmap.gc_pause import paused_gc
from flowmap.model.ending import Ending, read_ending
from flowmap.model.flow import UNNAMED_DRIVER, Flow, build_flow, star_center
from flowmap.model.pipeline import build_pipeline
from flowmap.model.sources import ViewSource
from flowmap.model.steps import step_bins, totals
from flowmap.model.types import (
    CounterStats,
    Detail,
    Health,
    ItemStats,
    OwnerStats,
    Pipeline,
    Projection,
    SeamKey,
    SeamStats,
    StepBins,
    Totals,
)
from flowmap.read.events import Hop, storage_bases, storage_origins
from flowmap.read.records import Events

__all__ = ["Events", "RunView", "ViewSource", "build_view"]


@dataclass(frozen=True)
class RunView:
    """Everything flowmap shows about one run. Frozen: outputs read it, never adjust it."""

    path: str
    truncated: bool
    projection: Projection | None  # set when the figures were scaled to a model preset
    steps: tuple[int, ...]  # training steps seen on hops, sorted (a block's first, for a block)
    num_steps: int  # the "per step" denominator: at least 1
    num_hops: int  # kept and folded
    t0_ns: int  # run start, host monotonic clock
    t_end_ns: int  # the last hop (t0_ns for a run without hops)
    seams: Mapping[SeamKey, SeamStats]  # heaviest first, ties by key
    owners: Mapping[str, OwnerStats]  # by name
    counters: Mapping[str, CounterStats]  # by name
    items: ItemStats
    totals: Totals
    health: Health
    detail: Detail
    events: Events = field(repr=False)
    exit_code: int | None = None  # the traced program's, from run.json; None: not recorded
    ending: Ending = Ending(None, None)  # how the program ended and how long it ran (run.json)
    # A projected view's hops as traced (same order as `events.hops`), for what reads how a
    # leaf's shape changed from hop to hop (`findings.prefix_resend`); None when not projected.
    traced_hops: Sequence[Hop] | None = field(default=None, repr=False)
    # A live watch's blocks of old steps (`flowmap.read.blocks`): a block's first step ->
    # (its last step, how many steps it stands for); empty: every step is in `steps`.
    step_spans: Mapping[int, tuple[int, int]] = field(default_factory=dict, repr=False)
    # Steps counted from the program's optimizer (run.json): its updates, and the step that
    # made them (`torch.optim.Adam.step`); None: the program set its own steps, or none.
    updates: int | None = None
    steps_from: str | None = None
    # `flowmap trace` with no map: the stages its watch of the first step found, in the order
    # first called (run.json); what a run stopped before it recorded anything can still tell.
    watched_stages: tuple[str, ...] = ()

    @property
    def duration_s(self) -> float:
        """The span of the recorded hops: the timeline's extent."""
        return (self.t_end_ns - self.t0_ns) / 1e9

    @property
    def wall_s(self) -> float:
        """How long the program ran: run.json's start to finish, else the span of its hops."""
        return self.ending.wall_s if self.ending.wall_s is not None else self.duration_s

    @property
    def order(self) -> tuple[str, ...]:
        """Owners in pipeline order: sources first, a sender before its receiver."""
        return self.pipeline.order

    @property
    def back_edges(self) -> frozenset[SeamKey]:
        """Seams that close a cycle (weight_sync -> rollout)."""
        return self.pipeline.back_edges

    @cached_property
    def pipeline(self) -> Pipeline:
        """Owners in pipeline order, back edges marked, each owner's resident items over time."""
        return build_pipeline(self, "owner")

    @property
    def has_steps(self) -> bool:
        """Whether the run has training steps; without, every "per step" figure is a total."""
        return bool(self.steps)

    @property
    def step_count(self) -> int:
        """How many training steps the run has seen (0: none was set): the optimizer's
        updates where flowmap counted them (step 0, before the first update, is no update)."""
        if self.updates is not None:
            return self.updates
        return self.num_steps if self.steps else 0

    @cached_property
    def flow(self) -> Flow:
        """Producer -> consumer edges from storage identity, the driver's hand-offs collapsed."""
        shards = self.events.shards
        return build_flow(self.events.hops, storage_bases(shards), storage_origins(shards))

    @property
    def draws_flow(self) -> bool:
        """Whether the pictures draw the flow instead of the seams: storage identity linked the
        stages past a driver that hands everything over, either a star of seams around one
        owner or the unnamed `main` a seam map's calls come from (nobody instrumented it)."""
        if not self.flow.found or len(self.flow.stages) < 3:
            return False
        return star_center(self.seams) is not None or \
            any(UNNAMED_DRIVER in (src, dst) for src, dst, _ in self.seams)

    @cached_property
    def roles(self) -> Pipeline:
        """The pipeline with instances merged into roles (`rollout ×2`), seams re-aggregated."""
        return build_pipeline(self, "role")

    @cached_property
    def seams_by_label(self) -> Mapping[str, SeamStats]:
        """`"src -> dst : name" -> SeamStats`: how a finding's `seams` lead back to their figures."""
        return {s.label: s for s in self.seams.values()}

    def step_bins(self, max_bins: int) -> StepBins:
        """Per seam bytes and hops in at most `max_bins` bins of consecutive steps."""
        return step_bins(self, list(self.seams), max_bins)

    def pipeline_at(self, instances: bool) -> Pipeline:
        """One node per owner (`instances=True`) or per role."""
        return self.pipeline if instances else self.roles


def build_view(run: ViewSource) -> RunView:
    """The read model of `run`, built whole. Prefer `run.view`, which builds it once per run."""
    with paused_gc():
        return _build(run)


def _build(run: ViewSource) -> RunView:
    return RunView(
        path=run.path,
        truncated=run.truncated,
        projection=run.projection,
        steps=tuple(run.steps),
        num_steps=run.num_steps,
        num_hops=run.num_hops,
        t0_ns=run.t0_ns,
        t_end_ns=max([h.t_ns for h in run.hops[-1:]] + [st.t_ns for st in run.seam_steps[-1:]],
                     default=run.t0_ns),
        seams=run.seams,
        owners=run.owners,
        counters=run.counters,
        items=run.items,
        totals=totals(run.events, run.seams),
        health=run.health,
        detail=_detail(run),
        events=run.events,
        exit_code=run.meta.get("exit_code") if type(run.meta.get("exit_code")) is int else None,
        ending=read_ending(run.meta),
        traced_hops=_traced_hops(run),
        step_spans=getattr(run, "step_spans", None) or {},
        updates=_int(run.meta.get("optimizer_updates")),
        steps_from=run.meta.get("steps_from") if isinstance(run.meta.get("steps_from"), str)
        else None,
        watched_stages=_strings(run.meta.get("watched_stages")),
    )


def _int(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _strings(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


_HOPS = attrgetter("hops")
_STEP = attrgetter("step")


def _traced_hops(run: ViewSource) -> Sequence[Hop] | None:
    traced = getattr(run, "traced", None)  # set on a projected `flowmap.model.run.Run`
    return None if traced is None else traced.hops


def _detail(run: ViewSource) -> Detail:
    # (fields taken out in C: a live watch builds this at every update)
    folded_hops = sum(map(_HOPS, run.seam_steps))
    if not run.seam_steps:
        return Detail(False, len(run.hops), 0, tuple(run.steps), run.num_steps)
    kept = set(map(_STEP, run.hops))
    kept.discard(None)
    steps = tuple(sorted(kept.difference(map(_STEP, run.seam_steps))))
    return Detail(True, len(run.hops), folded_hops, steps, max(1, len(steps)),
                  tuple(run.shared_channels))
