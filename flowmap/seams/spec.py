"""What a seam map says, as plain records: one `SeamSpec` per patched target.

A seam map names functions and methods of code flowmap did not write
(`package.module:Class.method`) and says which owner runs them and what
crosses into and out of them. These records are the validated form of the
YAML file (see `flowmap.seams.loader`); the patcher reads only these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowmap import trace_format as tf

# The transports of architecture.md; a seam map may only name these.
TRANSPORTS = tuple(t for t in tf.TRANSPORTS if t != tf.ZMQ)


@dataclass(slots=True, frozen=True)
class ExtraHop:
    """A hop derived from a seam's arguments or result, for data that is computed inline
    and never crosses a function boundary of its own (TRL's advantages, for one)."""

    payload: str  # a path rooted at an argument name, or at `result`
    src: str
    dst: str
    name: str
    line: int = 0


@dataclass(slots=True, frozen=True)
class SeamSpec:
    """One patched target and what to record when it is called."""

    target: str  # `package.module:Class.method` as written
    module: str
    qualname: str
    owner: str  # the callee's owner; the body runs as this owner
    name: str  # payload name of the call hop
    result_name: str  # payload name of the result hop
    args: tuple[str, ...] | None = None  # None: every argument but self/cls
    call: bool = True  # record the call hop (caller -> owner)
    result: bool = True  # record the result hop (owner -> caller)
    caller: str | None = None  # the source owner; None: the current owner at the call
    items: str | None = None  # path of item ids (rooted at an argument or `result`)
    dims: dict[str, tuple[str, ...]] = field(default_factory=dict)
    transport: str = "ref"
    step: str | None = None  # path of the training step, set before the call hop
    also: tuple[ExtraHop, ...] = ()
    optional: bool = False  # no warning when the target never appears
    # calls told apart by what they were given: arguments (or `self`) whose identity, and
    # `grad` (torch's grad mode), name the owner's instance: `policy/ref_model`
    split_by: tuple[str, ...] = ()
    source: str = ""  # the file the spec came from
    line: int = 0  # its line there (1-based)

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.source else f"line {self.line}"


@dataclass(slots=True)
class SeamMap:
    """All seams of one or more seam-map files, in file order."""

    seams: list[SeamSpec] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def extend(self, other: SeamMap) -> None:
        self.seams.extend(other.seams)
        self.sources.extend(other.sources)

    def by_module(self) -> dict[str, list[SeamSpec]]:
        out: dict[str, list[SeamSpec]] = {}
        for s in self.seams:
            out.setdefault(s.module, []).append(s)
        return out
