"""Read shards: JSON lines in, plain records out. Never runs code from the file.

A shard cut short by SIGKILL ends in a partial line, zero bytes (the unused
tail of its file mapping) or lacks its `end` event; the reader keeps every
complete event and marks the shard truncated. The file is trusted in nothing:
only regular files are opened (no FIFOs, devices, symlinks out of the run or
loops), read in blocks with a cap on line length, and every event is checked
against the format (`flowmap.read.validate`) — a bad one is skipped and
counted with its line number. A single file that is not a flowmap shard
raises `NotATrace` with one sentence; in a run directory such a shard is
reported and the others are read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from flowmap import trace_format as tf
from flowmap.errors import NotATrace
from flowmap.read import folded, halves
from flowmap.read.events import CounterSample as CounterSample  # re-exported: readers' records
from flowmap.read.events import Drop as Drop
from flowmap.read.events import Hop as Hop
from flowmap.read.events import Leaf as Leaf
from flowmap.read.events import LeafNote, SendHalf, ValueFigure
from flowmap.read.events import Mark as Mark
from flowmap.read.events import Shard as Shard
from flowmap.read.fields import Fields, Interned
from flowmap.read.fold import Cut, SeamStepFolder, past_window
from flowmap.read.hop_lines import HopLines
from flowmap.read.plain import as_int, as_text, clean, count, loads_strict, show_path
from flowmap.read.shared_once import SharedOnce
from flowmap.read.validate import CHECKS
from flowmap.rundir import MAX_HEADER as MAX_HEADER  # re-exported, with the safe open of a shard
from flowmap.rundir import open_regular as open_regular

IDENTITY = ("boot_id", "pid_ns", "start_ticks", "run_process")  # header fields naming a process
MAX_NOTED = 5  # bad lines whose number and reason a shard keeps
MAX_PARTS = 1_000_000  # `b` lines a shard keeps: bounded memory, a link lost past it


def read_header(path: str) -> dict[str, Any] | None:
    """A shard's header object, or None (empty, unreadable, not a shard)."""
    try:
        with open_regular(path) as f:
            first = f.readline(MAX_HEADER + 1)
        return parse_header(first, path) if first else None
    except (OSError, NotATrace):
        return None


def new_shard(path: str, header: dict[str, Any], pid: int | None = None) -> Shard:
    """The shard a header names, with no records yet."""
    argv = header.get("argv")
    shard = Shard(
        path=path, pid=as_int(header.get("pid")), ppid=as_int(header.get("ppid")),
        host=as_text(header.get("host"), ""),
        argv=[as_text(a, "") for a in argv if type(a) is str][:1000] if type(argv) is list else [],
        process=as_text(header.get("process"), None),
        t0_mono_ns=as_int(header.get("t0_mono_ns")), t0_wall_ns=as_int(header.get("t0_wall_ns")),
        identity={k: header[k] for k in IDENTITY if type(header.get(k)) in (int, str)},
    )
    shard.os_pid = shard.pid
    node = header.get("ray_node_id")
    if type(node) is str:
        shard.info["ray_node_id"] = as_text(node, "")[:200]
    if pid is not None:
        shard.pid = pid
    return shard


class ShardFeed:
    """A shard's lines after its header, fed as they come: all of a finished file, or what a
    growing one appended since (`flowmap.read.tail`). Complete lines go to the decoder; a
    line still being written waits for its newline; a line over `MAX_LINE` is skipped as
    one bad line, however many feeds it spans."""

    def __init__(self, shard: Shard, detail_hops: int | None = None,
                 hop_lines: bool = True) -> None:
        self.decoder = Decoder(shard, detail_hops)
        # what takes complete lines: first what the shard remembers of its hop lines
        # (`flowmap.read.hop_lines`: a steady run's lines, taken without decoding), a finished
        # file's and a growing one's alike; or (`hop_lines=False`) the decoder alone
        self.lines: Callable[[bytes, int], None] = (HopLines(self.decoder) if hop_lines
                                                    else self.batch)
        self.rest = b""  # a line read in part
        self.skipping = False  # inside an over-long line, until its newline
        self.handled = 0  # bytes taken: complete lines, and skipped ones

    @property
    def shard(self) -> Shard:
        return self.decoder.shard

    def take(self, data: bytes) -> None:
        """The shard's next bytes (none of them NUL)."""
        if self.rest:
            data, self.rest = self.rest + data, b""
        if self.skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self.handled += len(data)
                return
            self.skipping = False
            self.handled += nl + 1
            data = data[nl + 1:]
        end = data.rfind(b"\n")
        if end >= 0:
            self.lines(data, end)
            self.handled += end + 1
        rest = data[end + 1:]
        if len(rest) > tf.MAX_LINE:  # a partial line already past the bound: skipped
            self.skipping = True
            d = self.decoder
            d.line += 1
            d.bad(d.line, f"a line over {tf.MAX_LINE} bytes")
            self.handled += len(rest)
        else:
            self.rest = rest

    def batch(self, data: bytes, end: int) -> None:
        """Decode the complete lines `data[:end]` (`end`: the last one's newline)."""
        self.decoder.batch(data[:end].split(b"\n"))

    def snapshot(self, copy: bool = True, hops: list[Hop] | None = None) -> Shard:
        """The shard as read so far, its folded hops' records made: a copy, that more bytes
        fed leave as it is, or (a finished file, nothing more comes) the shard itself.
        `hops`: the copy's kept hops instead of the shard's (a watch's frame window)."""
        d = self.decoder
        sh = d.shard
        if copy:
            sh = dataclasses.replace(
                sh, hops=list(sh.hops if hops is None else hops), counters=list(sh.counters),
                marks=list(sh.marks), drops=list(sh.drops), errors=list(sh.errors),
                halves=list(sh.halves), seam_steps=list(sh.seam_steps),
                counter_folds=list(sh.counter_folds),
                mark_folds=list(sh.mark_folds), drop_folds=list(sh.drop_folds),
                bad_notes=list(sh.bad_notes))
        if d.folder is not None and d.cut is not None:
            sh.seam_steps += d.folder.seam_steps(d.strings.__getitem__, d.schemas.__getitem__)
            sh.fold_cut = (d.cut.step, d.cut.t_ns)
        return sh


def parse_header(line: bytes, path: str) -> dict[str, Any]:
    try:
        header = json.loads(line) if len(line) <= MAX_HEADER else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get(tf.HEADER) != tf.MAGIC:
        raise NotATrace(f"{show_path(path)} is not a flowmap trace")
    schema = header.get("schema")
    if type(schema) is not int or schema > tf.SCHEMA_VERSION:
        raise NotATrace(
            f"{show_path(path)} uses trace schema {as_text(str(schema), '')[:40]!r}; this flowmap "
            f"reads up to {tf.SCHEMA_VERSION} — upgrade flowmap"
        )
    return header


class Decoder:
    """Turns event lines into records, resolving interned strings and schemas."""

    def __init__(self, shard: Shard, detail_hops: int | None = None) -> None:
        self.shard = shard
        self.keep = detail_hops  # hops built one by one before `fold_hop` is asked
        self.cut: Cut | None = None
        self.folder: SeamStepFolder | None = None
        self.strings: dict[int, str] = {}
        self.schemas: dict[int, tuple[Leaf, ...]] = {}
        self.t0 = shard.t0_mono_ns
        self.at = Interned(shard.pid, self.t0, self.strings, self.schemas)  # the same tables
        self.line = 1  # number of the last line handled (the header is line 1)
        self.shared = SharedOnce()  # shared-memory storages this process already moved

    def bad(self, line: int, why: str) -> None:
        sh = self.shard
        sh.bad_lines += 1
        if len(sh.bad_notes) < MAX_NOTED:
            sh.bad_notes.append((line, why))

    def fold_hop(self, ev: list[Any]) -> bool:
        """Whether the (checked) hop event `ev` is past this shard's detail window; if so, fold it.

        Where the window ends: `flowmap.read.fold.past_window`.
        """
        t_ns = self.t0 + ev[1] * 1000
        cut, folder = self.cut, self.folder
        if cut is None or folder is None:
            self.cut, self.folder = Cut(ev[8], t_ns), SeamStepFolder(self.shard.pid)
            return False
        step = ev[8]
        # a step past the window's last is past it (the common case of a long run, per hop)
        if not (step is not None and cut.step is not None and step > cut.step) and \
                not past_window(cut, step, t_ns, len(self.shard.hops), self.keep or 0):
            return False
        folder.add_event(ev, t_ns)
        return True

    def batch(self, lines: list[bytes]) -> None:
        base = self.line
        self.line += len(lines)
        long = {i for i, raw in enumerate(lines) if len(raw) > tf.MAX_LINE or not raw}
        for i in sorted(long):
            if lines[i]:
                self.bad(base + i + 1, f"a line over {tf.MAX_LINE} bytes")
            lines[i] = b"null"
        joined = b"[" + b",".join(lines) + b"]"
        dirty = b"\\ud" in joined or b"\\uD" in joined
        try:
            events = loads_strict(joined.decode("utf-8"))
        except (ValueError, RecursionError):
            events = None
        if events is None or len(events) != len(lines):
            events = []
            for i, raw in enumerate(lines):
                try:
                    events.append(None if i in long else loads_strict(raw.decode("utf-8")))
                except (ValueError, RecursionError):
                    events.append(_BAD)
        # Hops are most of a trace: checked and built here, without a call per event.
        check_hop = CHECKS[tf.HOP]
        strings, schemas, sh, t0 = self.strings, self.schemas, self.shard, self.t0
        hops, keep = sh.hops, self.keep
        for i, ev in enumerate(events):
            if not dirty and type(ev) is list and ev and ev[0] == "h" and check_hop(
                ev, strings, schemas
            ):
                if keep is not None and len(hops) >= keep and self.fold_hop(ev):
                    sh.num_events += 1
                    continue
                hops.append(Hop(
                    t0 + ev[1] * 1000, sh.pid, strings[ev[2]], strings[ev[3]], strings[ev[4]],
                    ev[6], schemas[ev[5]], tuple(ev[7]), ev[8], ev[9], strings[ev[10]],
                    tuple(ev[11]) if ev[11] else (),
                ))
                sh.num_events += 1
                continue
            if ev is _BAD:
                self.bad(base + i + 1, "not JSON")
                continue
            if ev is None and i in long:
                continue
            if dirty:
                ev = clean(ev)
            self._event(ev, base + i + 1)

    def _event(self, ev: Any, line: int) -> None:
        if type(ev) is not list or not ev or type(ev[0]) is not str:
            self.bad(line, "not an event array")
            return
        kind = ev[0]
        check = CHECKS.get(kind)
        if check is None:
            return  # a kind from a newer minor writer: skipped
        if not check(ev, self.strings, self.schemas):
            self.bad(line, f"a {kind!r} event whose fields do not match the format")
            return
        BUILDERS[kind](self, ev)

    # -- record builders (fields already checked) --------------------------------
    def _string(self, ev: list[Any]) -> None:
        self.strings[ev[1]] = ev[2]

    def _schema(self, ev: list[Any]) -> None:
        s = self.strings
        self.schemas[ev[1]] = tuple(
            Leaf(s[p], k, tuple(tuple(d) if type(d) is list else d for d in shape),
                 s[dt], s[dev], nb, cnt, tuple(dims) if dims else None)
            for p, k, shape, dt, dev, nb, cnt, dims in ev[2]
        )

    def _hop(self, ev: list[Any]) -> None:
        s = self.strings
        sh = self.shard
        sh.num_events += 1
        if self.keep is not None and len(sh.hops) >= self.keep and self.fold_hop(ev):
            return
        sh.hops.append(Hop(
            self.t0 + ev[1] * 1000, sh.pid, s[ev[2]], s[ev[3]], s[ev[4]], ev[6],
            self.schemas[ev[5]], tuple(ev[7]), ev[8], ev[9], s[ev[10]],
            tuple(ev[11]) if ev[11] else (),
        ))  # (the same as the fast path in `batch`)

    def _counter(self, ev: list[Any]) -> None:
        sh = self.shard
        owner = self.strings[ev[4]] if len(ev) > 4 else ""
        sh.counters.append(CounterSample(self.t0 + ev[1] * 1000, sh.pid, self.strings[ev[2]],
                                         float(ev[3]), owner))
        sh.num_events += 1

    def _half(self, ev: list[Any]) -> None:
        sh = self.shard
        half = halves.decode(ev, self.t0 + ev[1] * 1000, sh.pid, self.strings.__getitem__,
                             self.schemas)
        if isinstance(half, SendHalf):
            self.shared.price(half.hop)
        sh.halves.append(half)
        sh.num_events += 1

    def _mark(self, ev: list[Any]) -> None:
        sh = self.shard
        owner = self.strings[ev[3]] if len(ev) > 3 else ""
        sh.marks.append(Mark(self.t0 + ev[1] * 1000, sh.pid, self.strings[ev[2]], owner))
        sh.num_events += 1

    def _drop(self, ev: list[Any]) -> None:
        sh = self.shard
        sh.drops.append(Drop(self.t0 + ev[1] * 1000, sh.pid, self.strings[ev[2]],
                             self.strings[ev[3]], tuple(ev[4] or ())))
        sh.num_events += 1

    def _notes(self, ev: list[Any]) -> None:
        sh, s, t_ns = self.shard, self.strings, self.t0 + ev[1] * 1000
        sh.notes.extend(LeafNote(t_ns, sh.pid, s[ev[2]], s[ev[3]], s[ev[4]], s[ev[5]], ev[6],
                                 note[0], note[1], note[2], note[3],
                                 note[4] if len(note) > 4 else None)
                        for note in ev[7])
        sh.num_events += 1

    def _attach(self, ev: list[Any], field: str, value: Any) -> None:
        """Set `field` of the hop (or send half) just read that a `t` or `w` line follows."""
        sh, s, t_ns = self.shard, self.strings, self.t0 + ev[1] * 1000
        last = sh.halves[-1] if sh.halves else None
        for h in (sh.hops[-1] if sh.hops else None,
                  last.hop if isinstance(last, SendHalf) else None):
            if h is not None and (h.t_ns, h.src, h.dst, h.name) == (t_ns, *map(s.get, ev[2:5])):
                setattr(h, field, value)  # unless it was folded
                break
        sh.num_events += 1

    def _text_keys(self, ev: list[Any]) -> None:  # the ids of the strings it carried
        self._attach(ev, "texts", tuple(ev[5]))

    def _windows(self, ev: list[Any]) -> None:  # the content windows of its arrays
        self._attach(ev, "windows", tuple((path, tuple(crcs)) for path, crcs in ev[5]))

    def _values(self, ev: list[Any]) -> None:
        sh = self.shard
        s = self.strings
        t_ns = self.t0 + ev[1] * 1000
        sh.values.extend(ValueFigure(t_ns, sh.pid, s[ev[2]], s[ev[3]], s[ev[4]], s[ev[5]], ev[6],
                                     *f) for f in ev[7])
        sh.num_events += 1

    def _part(self, ev: list[Any]) -> None:
        parts = self.shard.parts
        if len(parts) < MAX_PARTS:
            parts[ev[1]] = ev[2]

    def _origin(self, ev: list[Any]) -> None:
        origins = self.shard.origins
        if len(origins) < MAX_PARTS:
            origins.setdefault(ev[1], self.strings[ev[2]])

    def _folded_event(self, ev: list[Any]) -> None:
        folded.BUILDERS[ev[0]](self.shard, Fields(ev, self.at))
        self.shard.num_events += 1

    def _step(self, ev: list[Any]) -> None:
        self.shard.num_events += 1

    def _error(self, ev: list[Any]) -> None:
        sh = self.shard
        if len(sh.errors) < 1000:
            sh.errors.append(ev[2][:2000])
        sh.num_events += 1

    def _info(self, ev: list[Any]) -> None:
        sh = self.shard
        key, value = ev[2][:200], ev[3][:4096]
        if key == "owner":
            if value not in sh.owners and len(sh.owners) < 1000:
                sh.owners.append(value)
        elif len(sh.info) < 100:
            sh.info[key] = value
        sh.num_events += 1

    def _end(self, ev: list[Any]) -> None:
        sh = self.shard
        stats = ev[2]
        sh.num_events = count(stats.get("events"), sh.num_events)
        sh.num_errors = count(stats.get("errors"), sh.num_errors)
        sh.truncated = False


_BAD = object()

BUILDERS = {
    tf.STRING: Decoder._string, tf.SCHEMA: Decoder._schema, tf.HOP: Decoder._hop,
    tf.COUNTER: Decoder._counter, tf.MARK: Decoder._mark, tf.DROP: Decoder._drop,
    tf.STEP: Decoder._step, tf.ERROR: Decoder._error, tf.END: Decoder._end,
    tf.SEND_HALF: Decoder._half, tf.RECEIVE_HALF: Decoder._half,
    **dict.fromkeys(folded.BUILDERS, Decoder._folded_event), tf.LEAF_NOTES: Decoder._notes,
    tf.PROCESS_INFO: Decoder._info, tf.TEXT_KEYS: Decoder._text_keys,
    tf.VALUES: Decoder._values, tf.PART: Decoder._part, tf.ORIGIN: Decoder._origin,
    tf.WINDOWS: Decoder._windows,
}
