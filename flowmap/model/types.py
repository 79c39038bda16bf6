"""The read model's records: what every output of flowmap reads, and nothing else.

These are frozen so that no renderer can adjust a figure for its own picture:
a number means the same thing in the terminal, the JSON, the DOT, the HTML
and a baseline because there is one record of it. Every field says its unit
in its name (`*_bytes`, `*_s`, `*_ns`, `hops_*`). A dimension that varied
across hops is a `(min, max)` tuple everywhere (`Dim`), never a list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from flowmap.trace_format import CUDA_IPC, REF

SeamKey = tuple[str, str, str]  # (src, dst, name)
Dim = int | tuple[int, int]  # a fixed size, or (min, max) where the size varied
Shape = tuple[Dim, ...]
ItemId = Any  # an item id as the program gave it (int or str); compared, never read
Level = Literal["owner", "role"]
# Transports whose hops copy no bytes: a Python reference in one process, a CUDA IPC handle
# to the sender's device memory. Their payload is what the receiver can read, not bytes moved.
NO_COPY = (REF, CUDA_IPC)


# Bytes per element of the dtypes torch and numpy name: turns a leaf's bytes
# back into elements (tokens), and tells a widened dtype from a narrowed one.
ITEMSIZE = {
    "bool": 1, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "half": 2,
    "int32": 4, "uint32": 4, "float32": 4, "float": 4, "complex32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "double": 8, "long": 8, "complex64": 8,
    "complex128": 16,
}
ARRAY_KINDS = ("tensor", "ndarray")  # leaf kinds that scale with the problem


def role_of(owner: str) -> str:
    """`rollout/0` -> `rollout`; `trainer/rank1` -> `trainer`."""
    return owner.split("/", 1)[0]


def seam_label(key: SeamKey) -> str:
    """`("rollout/0", "ready_buffer", "trajectory")` -> `rollout/0 -> ready_buffer : trajectory`.

    The key's text form, kept with the key so that `SeamStats.label` and every
    output (through `flowmap.model.format`) spell a seam the same way.
    """
    src, dst, name = key
    return f"{src} -> {dst} : {name}"


@dataclass(frozen=True, slots=True)
class LeafStats:
    """A leaf path of a seam's payload, merged over every hop that carried it."""

    path: str  # inside the payload: `batch.input_ids`, `[*].reward` ("" for the payload itself)
    kind: str  # tensor, ndarray, int, str, bytes, ... or "mixed" when hops disagreed
    dtypes: tuple[str, ...]  # sorted; empty for Python scalars
    shape: Shape  # per dim an int, or (min, max) where it varied; () when ranks differed
    dims: tuple[str, ...] | None  # dimension names given with `dims=` at the hop
    total_bytes: int
    max_bytes: int  # of this leaf on one hop
    hops: int  # how many hops carried this leaf
    # (least, largest) number of dims where hops disagreed (then `shape` is ()): a leaf
    # whose rank varies is not a 0-d one
    ranks: tuple[int, int] | None = None

    @property
    def mean_bytes(self) -> float:
        return self.total_bytes / self.hops if self.hops else 0.0

    @property
    def dtype(self) -> str:
        """One string: `float32`, or `float32|float64` when hops disagreed."""
        return "|".join(self.dtypes)


@dataclass(frozen=True, slots=True)
class SeamStats:
    """One seam `src -> dst : name` over the whole run (or, at role level, its owners' seams)."""

    src: str
    dst: str
    name: str
    hops: int
    total_bytes: int
    min_bytes: int  # per hop
    max_bytes: int
    p50_bytes: int
    p90_bytes: int
    p99_bytes: int
    bytes_per_step_mean: float  # over all the run's steps
    bytes_per_step_max: int  # the heaviest step (hops without a step count as one step)
    hops_per_step: float
    hops_per_step_max: int
    transports: Mapping[str, int]  # transport -> hops, sorted by name
    leaves: tuple[LeafStats, ...]  # heaviest first
    first_t_ns: int
    last_t_ns: int
    residency_mean_s: float | None  # how long items sat at dst before leaving it; None: no items
    residency_max_s: float | None
    items: int  # item ids carried, summed over hops
    hop_bytes: tuple[int, ...]  # each kept hop's bytes, in time order (for histograms)
    # (mean bytes per hop, hops) of each folded step (`flowmap.read.fold`), in time order
    folded_bytes: tuple[tuple[int, int], ...] = ()

    @property
    def key(self) -> SeamKey:
        return (self.src, self.dst, self.name)

    @property
    def moved_fraction(self) -> float:
        """The share of its hops that copied or sent bytes: `ref` hops passed a Python reference,
        `cuda_ipc` hops a handle to the sender's device memory.

        Payload size (`total_bytes`) is what the receiver got; bytes moved
        leave out the hops where nothing was copied (`NO_COPY`).
        """
        if not self.hops:
            return 0.0
        return (self.hops - sum(self.transports.get(t, 0) for t in NO_COPY)) / self.hops

    @property
    def moved_bytes_per_step(self) -> float:
        """Bytes per step copied or sent (payload size of the non-`ref` hops, by their share)."""
        return self.bytes_per_step_mean * self.moved_fraction

    @property
    def label(self) -> str:
        return seam_label(self.key)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(sorted({dt for leaf in self.leaves for dt in leaf.dtypes}))


@dataclass(frozen=True, slots=True)
class OwnerStats:
    """An owner's traffic: what `report --json` lists under `owners`."""

    name: str
    role: str
    bytes_in: int
    bytes_out: int
    hops_in: int
    hops_out: int
    pids: tuple[int, ...]  # the processes it ran in (`owner_stats` says how that is known)
    hosts: tuple[str, ...] = ()  # the hosts of those processes, as the run names them


@dataclass(frozen=True, slots=True)
class CounterStats:
    name: str
    count: int
    min: float
    max: float
    mean: float
    last: float
    series: tuple[tuple[float, float], ...]  # (seconds since run start, value)
    owners: tuple[str, ...]


# One event of an item's life: (seconds since run start, owner, "arrive" | "leave" | "drop").
# A plain tuple: a run holds two per item per hop.
ItemEvent = tuple[float, str, str]


@dataclass(frozen=True, slots=True)
class ItemLife:
    """Where one item went, from its first hop to its last event."""

    item: ItemId
    born_s: float
    end_s: float
    dropped: str | None  # the drop reason, if dropped
    events: tuple[ItemEvent, ...]


@dataclass(frozen=True, slots=True)
class ItemStats:
    total: int
    consumed: int
    dropped: Mapping[str, int]  # reason -> count, sorted by reason
    lives: Mapping[ItemId, ItemLife]

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())


@dataclass(frozen=True, slots=True)
class Detail:
    """The part of a run kept hop by hop; past it, hops were folded per seam and step.

    Per-seam figures count every hop either way. What follows one payload or
    item across hops (pass-through, duplicates, drops, item lifetimes,
    residency) can only read the kept hops: the detail window.
    """

    folded: bool  # some hops were folded (a long run read past its window, or `--aggregate`)
    hops: int  # kept one by one
    folded_hops: int
    steps: tuple[int, ...]  # steps every hop of which was kept
    num_steps: int  # the "per step" denominator of figures read from kept hops: at least 1
    # Queues several owners read, whose folded messages were shared out among them by
    # count (`read/halves.py`): hops per reader exact, bytes apportioned.
    shared_channels: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        """One line for outputs to show where it applies; "" when every hop was kept."""
        if not self.folded:
            return ""
        span = f", steps {self.steps[0]}..{self.steps[-1]}" if self.steps else ""
        shared = ""
        if self.shared_channels:
            n = len(self.shared_channels)
            shared = (f"; {n} queue{'s' if n > 1 else ''} read by several owners: their folded "
                      f"messages are shared out by count, bytes per reader apportioned")
        return (f"detail window: {self.hops:,} of {self.hops + self.folded_hops:,} hops kept"
                f"{span}; findings that follow one payload or item read only these, "
                f"per-seam figures count every hop{shared}")


@dataclass(frozen=True, slots=True)
class Totals:
    """All seams together: what a run-wide budget and a page heading read."""

    total_bytes: int
    bytes_per_step_mean: float  # payload size: what the receivers got, `ref` hops included
    bytes_per_step_max: int  # the heaviest step, all seams
    max_hop_bytes: int  # the largest single hop
    moved_bytes_per_step_mean: float = 0.0  # copied or sent: without in-process `ref` hops


@dataclass(frozen=True, slots=True)
class Projection:
    """What a projected run's figures were scaled to (`--project PRESET@CONTEXT`)."""

    preset: str
    context: int | None  # tokens, when a context was given
    context_label: str | None  # as the user wrote it: `32k`
    sizes: Mapping[str, int]  # dim name -> size used, sorted
    note: str  # one sentence every output shows next to projected figures


@dataclass(frozen=True, slots=True)
class Node:
    """An owner (or, at role level, a role and its instances) in the pipeline."""

    name: str
    role: str
    instances: tuple[str, ...]  # the owners it stands for (itself at owner level)
    pids: tuple[int, ...]
    bytes_in: int
    bytes_out: int
    hops_in: int
    hops_out: int
    bytes_in_per_step: float
    bytes_out_per_step: float
    order: int  # pipeline position: sources first, the loop's closing edge points backwards
    resident: tuple[tuple[float, int], ...]  # (seconds, items held), bounded, peaks kept
    resident_max: int
    hosts: tuple[str, ...] = ()  # the hosts of its processes

    @property
    def label(self) -> str:
        n = len(self.instances)
        return f"{self.name} ×{n}" if n > 1 else self.name


@dataclass(frozen=True, slots=True)
class Edge:
    """A seam placed in the pipeline."""

    seam: SeamStats
    members: tuple[str, ...]  # owner-level seam labels it stands for (itself at owner level)
    back_edge: bool  # closes a cycle (weight_sync -> rollout): drawn against the flow


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Nodes in pipeline order and seams sorted by label, at one level (owners or roles)."""

    level: Level
    nodes: tuple[Node, ...]  # by `order`
    edges: tuple[Edge, ...]  # by seam label
    total_bytes: int
    total_bytes_per_step: float

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    @property
    def back_edges(self) -> frozenset[SeamKey]:
        return frozenset(e.seam.key for e in self.edges if e.back_edge)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)


@dataclass(frozen=True, slots=True)
class StepBin:
    """Consecutive training steps grouped for a chart; times span their hops."""

    first_step: int | None
    last_step: int | None
    num_steps: int
    t0_s: float | None
    t1_s: float | None


@dataclass(frozen=True, slots=True)
class StepBins:
    """Per seam, bytes and hops in each bin of consecutive steps."""

    bins: tuple[StepBin, ...]
    bytes: Mapping[SeamKey, tuple[int, ...]]  # one value per bin
    hops: Mapping[SeamKey, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Process:
    """A traced process: its number in the run (`pid`, the OS's `os_pid` unless two processes
    of the run share one), its host as the run names it, and where Ray ran it."""

    pid: int
    os_pid: int
    host: str
    name: str | None  # the shard header's process name
    ray_node: str | None  # the Ray node id, hex, where it is a Ray worker or driver
    owners: tuple[str, ...]  # owners that said they run here


@dataclass(frozen=True, slots=True)
class Health:
    """How complete the capture is: the reader's and the tracer's own account."""

    shards: int
    events: int
    tracer_errors: int
    error_messages: tuple[str, ...]
    truncated_shards: tuple[str, ...]
    bad_lines: int
    problems: tuple[str, ...] = ()  # one sentence each: empty shards, bad lines, files skipped
    processes: tuple[Process, ...] = ()  # one per traced process, by host then pid

    @property
    def hosts(self) -> tuple[str, ...]:
        """The run's hosts, in the order of their processes."""
        return tuple(dict.fromkeys(p.host for p in self.processes))
