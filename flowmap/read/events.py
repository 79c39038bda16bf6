"""The records a shard is read into: hops, counter samples, marks, drops, their folds, halves, a shard.

Plain slotted dataclasses with no behaviour beyond a shard's own summary of
its problems, kept apart from `reader` (which turns untrusted bytes into
them) so that every layer above can name them without the parsing code.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Leaf:
    """One leaf of a payload. `shape` dims are ints, or [min, max] where a folded list varied."""

    path: str
    kind: str
    shape: tuple[Any, ...]
    dtype: str
    device: str
    nbytes: int
    count: int
    dims: tuple[str, ...] | None


@dataclass(slots=True)
class Hop:
    """One crossing of a seam. `t_ns` is on the host's monotonic clock, shared by all shards."""

    t_ns: int
    pid: int
    src: str
    dst: str
    name: str
    nbytes: int
    leaves: tuple[Leaf, ...]
    storages: tuple[int, ...]
    step: int | None
    version: int | None
    transport: str
    items: tuple[Any, ...]
    wire_bytes: int | None = None  # what crossed a transport's channel (pickled size), if known
    # A transport hop whose receiver named the storages it unpickled: (its pid, their ids)
    arrived: tuple[int, tuple[int, ...]] | None = None
    # When its receiver took it (a transport hop joined to its receive half); `t_ns` is the
    # send's: through a queue, what was put first may be taken long after
    received_ns: int | None = None
    # Ids of the strings a hop of text carried (event `t`; per shard, one per string object)
    texts: tuple[int, ...] = ()
    # A transport hop of text: the receiver's ids of the strings it unpickled (in `arrived`'s
    # process), in the order of `texts`
    arrived_texts: tuple[int, ...] = ()
    # A transport message's key (its length and a checksum of its bytes), where it has one
    key: str = ""
    # The content windows of the arrays a transport serialised: (path, crcs) each (`w` line)
    windows: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def seam(self) -> tuple[str, str, str]:
        return (self.src, self.dst, self.name)


@dataclass(slots=True)
class CounterSample:
    t_ns: int
    pid: int
    name: str
    value: float
    owner: str


@dataclass(slots=True)
class Mark:
    t_ns: int
    pid: int
    name: str
    owner: str


@dataclass(slots=True)
class Drop:
    t_ns: int
    pid: int
    owner: str
    reason: str
    items: tuple[Any, ...]


@dataclass(slots=True)
class LeafEvent:
    """What a process said of one leaf of the hop it just recorded, keyed to that hop's seam
    by `src`, `dst` and `name` (a send half's `dst` is where it would go unreceived:
    `(untraced)`) and to the leaf by `path`."""

    t_ns: int
    pid: int
    src: str
    dst: str
    name: str
    transport: str
    step: int | None
    path: str


@dataclass(slots=True)
class LeafNote(LeafEvent):
    """What a hop's schema cannot say about one of its tensors (event `n`).

    `storage_bytes`: the storage behind a view, when larger than the view (it
    travels whole through pickle and shared memory); `real`: the non-zero
    positions of a mask; `numbers`: the numbers a text leaf holds, written as text
    (`flowmap.integrations.transports.number_text`).
    """

    nbytes: int
    storage_bytes: int | None
    real: int | None
    numbers: int | None = None


@dataclass(slots=True)
class MarkFold:
    """The phase markers of one name in one step of one process, folded."""

    t_ns: int  # the last one
    t_first_ns: int
    pid: int
    name: str
    owner: str
    step: int | None
    count: int


@dataclass(slots=True)
class ValueFigure(LeafEvent):
    """Figures of one leaf's values on a sampled hop (event `v`, only under `trace --values`).

    `sum` is a Python number list's or a short integer vector's sum (null for other
    arrays); `zero_tail` the elements in each row's trailing zeros, or leading zeros
    where a batch's rows all end filled (null for lists); `filled` the elements at
    positions that hold something (null for lists, and in traces written before it).
    """

    min: float
    max: float
    sum: float | None
    zero_tail: int | None
    elements: int
    filled: int | None = None


@dataclass(slots=True)
class CounterFold(MarkFold):
    """The samples of one counter in one step of one process, folded (`trace --aggregate`):
    a name's events in a step, as a mark fold counts them, and their values' statistics.

    Count, sum, least, largest and last value are every statistic a counter is
    read for, so these read as exactly as the samples would; a chart draws one
    point per fold (the step's mean, at its last sample's time).
    """

    total: float
    min: float
    max: float
    last: float


@dataclass(slots=True)
class DropFold:
    """The drops of one owner and reason in one step of one process, folded: how many
    events, and how many item ids they named (the ids themselves are not kept)."""

    t_ns: int  # the last drop
    t_first_ns: int
    pid: int
    owner: str
    reason: str
    step: int | None
    count: int
    num_items: int


@dataclass(slots=True)
class SeamStep:
    """Every hop of one seam in one step, folded into one record.

    Two producers, one shape: `flowmap trace --aggregate` writes these (event
    `a`) once a process is past its detail window, so a long run's trace grows
    with seams x steps rather than with hops; and a streaming read folds the
    hops of a long full trace into the same records instead of holding each
    one. Everything above the reader computes per-seam figures (hops, bytes per
    step, largest hop) from `Hop`s and `SeamStep`s alike. `leaves` is the
    step's merged schema: a dim that varied is `[min, max]`, `nbytes` the
    largest a leaf was. Per-hop identity (storages, item ids) is not kept:
    only the count of item ids.
    """

    t_ns: int  # the last folded hop, on the host's monotonic clock
    t_first_ns: int  # the first folded hop
    pid: int
    src: str
    dst: str
    name: str
    step: int | None
    transport: str
    hops: int
    nbytes_sum: int
    nbytes_min: int
    nbytes_max: int
    wire_bytes_sum: int | None
    num_items: int
    version_min: int | None
    version_max: int | None
    leaves: tuple[Leaf, ...]
    # Set where a live watch keeps a block of old steps as one record (`step`: the block's
    # first; `flowmap.read.blocks`); None: the record is the one step `step`.
    block: StepBlock | None = None

    @property
    def seam(self) -> tuple[str, str, str]:
        return (self.src, self.dst, self.name)


@dataclass(frozen=True, slots=True)
class StepBlock:
    """Old steps of a long run that a live watch holds as one record per seam and process.

    Sums, least and largest values add up over steps, so the records of a block keep them
    exactly; what a block cannot keep, its steps one by one, it keeps as the figures read
    per step: which steps it holds, and each step's largest bytes and hops, for the seam
    and for the whole run (`flowmap.read.blocks`).
    """

    steps: tuple[tuple[int, int], ...]  # the steps it holds: ranges (first, last), ascending
    bytes_max: int  # the seam's largest step in the block (its processes together)
    hops_max: int  # ... and most hops in one step
    run_bytes_max: int  # the run's largest step in the block (every seam together)

    @property
    def first(self) -> int:
        return self.steps[0][0]

    @property
    def last(self) -> int:
        return self.steps[-1][1]

    @property
    def count(self) -> int:
        """How many steps it holds."""
        return sum(hi - lo + 1 for lo, hi in self.steps)

    def holds(self, step: int) -> bool:
        return any(lo <= step <= hi for lo, hi in self.steps)


@dataclass(slots=True)
class SendHalf:
    """The sender's hop, its `dst` being where it goes if no receive half joins it."""

    hop: Hop
    channel: str
    key: str

    @property
    def t_ns(self) -> int:
        return self.hop.t_ns

    @property
    def step(self) -> int | None:
        return self.hop.step


@dataclass(slots=True)
class ReceiveHalf:
    t_ns: int
    pid: int
    owner: str
    name: str
    transport: str
    channel: str
    key: str
    wire_bytes: int | None
    storages: tuple[int, ...] = ()  # the receiver's ids of the tensors it unpickled
    leaves: tuple[Leaf, ...] = ()  # what it unpickled, when more than bytes
    texts: tuple[int, ...] = ()  # the receiver's ids of the strings and floats it unpickled


@dataclass(slots=True)
class SendFold:
    """Send halves of one seam, step and channel folded by their process (event `X`)."""

    seam_step: SeamStep  # its `dst` is the fallback destination
    channel: str

    @property
    def step(self) -> int | None:
        return self.seam_step.step


@dataclass(slots=True)
class ReceiveFold:
    """Receive halves of one owner and channel in one step, folded (event `Y`): a count."""

    t_ns: int  # the last
    t_first_ns: int
    pid: int
    owner: str
    name: str
    transport: str
    channel: str
    step: int | None
    count: int
    wire_bytes_sum: int | None


Half = SendHalf | ReceiveHalf | SendFold | ReceiveFold  # what a shard holds until the run joins them


@dataclass(slots=True)
class Shard:
    """One process's events, as read."""

    path: str
    pid: int
    ppid: int
    host: str
    argv: list[str]
    process: str | None
    t0_mono_ns: int
    t0_wall_ns: int
    hops: list[Hop] = field(default_factory=list)
    counters: list[CounterSample] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    drops: list[Drop] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    halves: list[Half] = field(default_factory=list)  # transport hop halves, joined by the run
    seam_steps: list[SeamStep] = field(default_factory=list)  # folded hops (`trace --aggregate`)
    counter_folds: list[CounterFold] = field(default_factory=list)
    mark_folds: list[MarkFold] = field(default_factory=list)
    drop_folds: list[DropFold] = field(default_factory=list)
    notes: list[LeafNote] = field(default_factory=list)  # leaf notes of hops that moved bytes
    values: list[ValueFigure] = field(default_factory=list)  # sampled figures (`trace --values`)
    # `b` lines: a view's storage id -> the id of the storage it lies in (trace_format)
    parts: dict[int, int] = field(default_factory=dict)
    # `o` lines: a storage id -> the owner that made what it holds (before the recording
    # opened, or written in place since its last hop)
    origins: dict[int, str] = field(default_factory=dict)
    fold_cut: tuple[int | None, int] | None = None  # (step, t_ns) where a read began to fold
    num_events: int = 0
    num_errors: int = 0
    truncated: bool = True  # until an `end` event is seen
    bad_lines: int = 0
    bad_notes: list[tuple[int, str]] = field(default_factory=list)  # (line, why), first few
    empty: bool = False
    os_pid: int = 0  # the pid the OS gave (`pid` is the run's number for it, unique in the run)
    identity: dict[str, Any] = field(default_factory=dict)  # boot_id, pid_ns, start_ticks, ...
    info: dict[str, str] = field(default_factory=dict)  # `i` events: ray_node_id, ...
    owners: list[str] = field(default_factory=list)  # owners whose code runs here (`i` owner)
    host_label: str = ""  # the host as a run names it, unique in the run (`read.identity`)

    def problems(self) -> list[str]:
        """What a reader should be told about this shard, one sentence each."""
        name = os.path.basename(self.path)
        out = []
        if self.empty:
            out.append(f"{name} is empty: its process wrote nothing (a full disk, or killed at start)")
        if self.bad_lines:
            line, why = self.bad_notes[0] if self.bad_notes else (0, "")
            out.append(f"{name}: {self.bad_lines} bad line(s) skipped, first at line {line} ({why})")
        return out


def storage_bases(shards: Iterable[Shard]) -> dict[tuple[int, int], int]:
    """(pid, a view's storage id) -> the id of the storage it lies in, chains followed
    (`b` lines, flowmap/trace_format.py): where data is followed, a slice is its base's data."""
    out: dict[tuple[int, int], int] = {}
    for sh in shards:
        parts = sh.parts
        for view, base in parts.items():
            for _ in range(64):  # a chain of views, bounded (ids only point back in time)
                up = parts.get(base)
                if up is None or up == base:
                    break
                base = up
            out[(sh.pid, view)] = base
    return out


def storage_origins(shards: Iterable[Shard]) -> dict[tuple[int, int], str]:
    """(pid, storage id) -> the owner that made what it holds (`o` lines)."""
    return {(sh.pid, sid): owner for sh in shards for sid, owner in sh.origins.items()}
