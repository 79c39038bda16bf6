"""Read shards: JSON lines in, plain records out. Never runs code from the file.

A shard cut short by SIGKILL ends in a partial line or lacks its `end` event;
the reader keeps every complete event and marks the shard truncated. Anything
that is not a flowmap shard raises `NotATrace` with one sentence for the user.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from flowmap import trace_format as tf
from flowmap.errors import NotATrace
from flowmap.model import halves

CHUNK_LINES = 20_000


@dataclass(slots=True)
class Leaf:
    """One leaf of a payload. `shape` dims are ints, or [min, max] where a folded list varied."""

    path: str
    kind: str
    shape: tuple
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
    halves: list[Any] = field(default_factory=list)  # transport hop halves, joined by the run
    num_events: int = 0
    num_errors: int = 0
    truncated: bool = True  # until an `end` event is seen
    bad_lines: int = 0


def read_shard(path: str) -> Shard:
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise NotATrace(f"cannot read {path}: {exc.strerror or exc}") from None
    with f:
        first = f.readline()
        header = _header(first, path)
        shard = Shard(
            path=path,
            pid=int(header.get("pid", 0)),
            ppid=int(header.get("ppid", 0)),
            host=str(header.get("host", "")),
            argv=list(header.get("argv") or []),
            process=header.get("process"),
            t0_mono_ns=int(header.get("t0_mono_ns", 0)),
            t0_wall_ns=int(header.get("t0_wall_ns", 0)),
        )
        _Decoder(shard).feed(f)
    return shard


def _header(line: bytes, path: str) -> dict[str, Any]:
    try:
        header = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        header = None
    if not isinstance(header, dict) or header.get(tf.HEADER) != tf.MAGIC:
        raise NotATrace(f"{path} is not a flowmap trace")
    schema = header.get("schema")
    if not isinstance(schema, int) or schema > tf.SCHEMA_VERSION:
        raise NotATrace(
            f"{path} uses trace schema {schema!r}; this flowmap reads up to "
            f"{tf.SCHEMA_VERSION} — upgrade flowmap"
        )
    return header


class _Decoder:
    """Turns event lines into records, resolving interned strings and schemas."""

    def __init__(self, shard: Shard) -> None:
        self.shard = shard
        self.strings: dict[int, str] = {}
        self.schemas: dict[int, tuple[Leaf, ...]] = {}
        self.t0 = shard.t0_mono_ns

    def feed(self, f: Any) -> None:
        data = f.read()
        end = data.rfind(b"\n")
        # A partial last line means the writer was killed mid-write: drop it.
        lines = data[: end + 1].splitlines() if end >= 0 else []
        # One json.loads per chunk of lines is several times faster than one
        # per line; a chunk with a bad line falls back to line by line.
        for i in range(0, len(lines), CHUNK_LINES):
            chunk = lines[i : i + CHUNK_LINES]
            try:
                events = json.loads(b"[" + b",".join(chunk) + b"]")
            except ValueError:
                events = None
            if events is not None:
                for ev in events:
                    self._safe_event(ev)
                continue
            for raw in chunk:
                try:
                    ev = json.loads(raw)
                except ValueError:
                    self.shard.bad_lines += 1
                    continue
                self._safe_event(ev)

    def _safe_event(self, ev: Any) -> None:
        try:
            self._event(ev)
        except (ValueError, TypeError, IndexError, KeyError):
            self.shard.bad_lines += 1

    def _s(self, i: int) -> str:
        return self.strings[i]

    def _event(self, ev: list[Any]) -> None:
        kind = ev[0]
        sh = self.shard
        if kind == tf.STRING:
            self.strings[ev[1]] = ev[2]
            return
        if kind == tf.SCHEMA:
            self.schemas[ev[1]] = tuple(
                Leaf(self._s(p), k, tuple(tuple(d) if isinstance(d, list) else d for d in shape),
                     self._s(dt), self._s(dev), nb, cnt, tuple(dims) if dims else None)
                for p, k, shape, dt, dev, nb, cnt, dims in ev[2]
            )
            return
        t_ns = self.t0 + ev[1] * 1000
        if kind == tf.HOP:
            sh.hops.append(Hop(
                t_ns, sh.pid, self._s(ev[2]), self._s(ev[3]), self._s(ev[4]), ev[6],
                self.schemas[ev[5]], tuple(ev[7]), ev[8], ev[9], self._s(ev[10]),
                tuple(ev[11]) if ev[11] else (),
            ))
        elif kind == tf.COUNTER:
            owner = self._s(ev[4]) if len(ev) > 4 else ""
            sh.counters.append(CounterSample(t_ns, sh.pid, self._s(ev[2]), float(ev[3]), owner))
        elif kind == tf.MARK:
            owner = self._s(ev[3]) if len(ev) > 3 else ""
            sh.marks.append(Mark(t_ns, sh.pid, self._s(ev[2]), owner))
        elif kind == tf.DROP:
            sh.drops.append(Drop(t_ns, sh.pid, self._s(ev[2]), self._s(ev[3]), tuple(ev[4] or ())))
        elif kind == tf.SEND_HALF or kind == tf.RECEIVE_HALF:
            sh.halves.append(halves.decode(ev, t_ns, sh.pid, self._s, self.schemas))
        elif kind == tf.ERROR:
            sh.errors.append(str(ev[2]))
        elif kind == tf.END:
            stats = ev[2] if len(ev) > 2 and isinstance(ev[2], dict) else {}
            sh.num_events = int(stats.get("events", sh.num_events))
            sh.num_errors = int(stats.get("errors", sh.num_errors))
            sh.truncated = False
            return
        elif kind == tf.STEP:
            return
        else:
            return  # unknown kinds from a newer minor writer are skipped
        sh.num_events += 1


def shard_paths(run_path: str) -> list[str]:
    """The shard files of a run directory (or the one file given), sorted for determinism."""
    if os.path.isfile(run_path):
        return [run_path]
    if not os.path.isdir(run_path):
        raise NotATrace(f"{run_path} does not exist")
    paths = sorted(
        os.path.join(run_path, n) for n in os.listdir(run_path) if n.endswith(tf.SHARD_SUFFIX)
    )
    if not paths:
        raise NotATrace(f"{run_path} holds no flowmap shards (*{tf.SHARD_SUFFIX})")
    return paths
