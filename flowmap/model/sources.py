"""What the model's builders read, as protocols: a run's records, or the view of them.

Each builder names the least it reads, so that a run seen at role level, the
records of a finished run and a view all serve where they hold it; the
protocols are built from one another, and a view's source (`ViewSource`)
holds what every builder reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from flowmap.model import types
from flowmap.model.types import OwnerStats, SeamKey, SeamStats
from flowmap.read.events import Drop, Hop, SeamStep
from flowmap.read.records import Events


class Timed(Protocol):
    """A run's events on one clock, and its start on it."""

    @property
    def events(self) -> Events: ...
    @property
    def t0_ns(self) -> int: ...


class Stepped(Protocol):
    """A run's "per step" denominator: at least 1."""

    @property
    def num_steps(self) -> int: ...


class ItemSource(Protocol):
    """What follows items (residency, lives): a run's kept hops and drops."""

    @property
    def hops(self) -> Sequence[Hop]: ...
    @property
    def drops(self) -> Sequence[Drop]: ...


class HopSource(ItemSource, Stepped, Protocol):
    """What seam aggregation reads: a run, or a run seen at role level."""

    @property
    def seam_steps(self) -> Sequence[SeamStep]: ...


class StepSource(Timed, Protocol):
    """What step bins are counted from: a run's steps and events (a `RunView`)."""

    @property
    def steps(self) -> Sequence[int]: ...


class PipelineSource(Timed, Stepped, Protocol):
    """What a pipeline is computed from: a run's aggregates and its events (a `RunView`)."""

    @property
    def seams(self) -> Mapping[SeamKey, SeamStats]: ...
    @property
    def owners(self) -> Mapping[str, OwnerStats]: ...


class ViewSource(HopSource, StepSource, PipelineSource, Protocol):
    """What a view is built from: a run's records (`flowmap.read.records`) and its aggregates."""

    @property
    def path(self) -> str: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def projection(self) -> types.Projection | None: ...
    @property
    def num_hops(self) -> int: ...
    @property
    def shared_channels(self) -> list[str]: ...
    @property
    def meta(self) -> dict[str, Any]: ...
    @property
    def counters(self) -> dict[str, types.CounterStats]: ...
    @property
    def items(self) -> types.ItemStats: ...
    @property
    def health(self) -> types.Health: ...
