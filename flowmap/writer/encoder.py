"""`TraceWriter`: every line of a shard, encoded with the shard's interning.

A shard names strings, payload schemas and storages by ids that are defined
once, by the first line that needs them (`flowmap.trace_format`). The writer
keeps those tables and writes each event as one line, preceded by the `s` and
`S` lines it interns. It owns no file: lines go to two sinks, `write` for
lines that are not events (the header, interned strings and schemas, errors,
the end) and `emit` for events (the tracer counts those, and writes them
straight into its shard's mapping).

Not thread-safe by itself: a caller holds `lock` around each call, so that a
string's or schema's line reaches the file before the events that use it.
Most lines are formatted by hand: every field but a few strings is an int or
null, and a hop line is written once per hop (`json.dumps` is ~3x slower).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import is_
from typing import Any

from flowmap import trace_format as tf
from flowmap.writer.storage_table import StorageTable
from flowmap.writer.tally import HopTally

# Names longer than this are cut (with a note of how much): a line must stay within
# what readers take (trace_format.MAX_LINE), even if a character needs a 6-byte escape.
MAX_NAME = 256 * 1024

# A leaf as a schema line holds it: (path, kind, shape, dtype, device, nbytes, count, dims).
Leaf = tuple[Any, ...]
Sink = Callable[[str], None]

def _opaque(obj: Any) -> str:
    return f"<{type(obj).__name__}>"  # never the object's own str(): that is user code


dumps = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_opaque
).encode


def encode_line(line: str) -> bytes:
    """One line as UTF-8 with its newline; a lone surrogate (`os.fsdecode` of bytes that are
    not UTF-8) is written as its JSON escape `\\udcXX`: the file stays valid UTF-8 and reads
    back the same."""
    return (line + "\n").encode("utf-8", "backslashreplace")


def items_json(items: Sequence[Any] | None) -> str:
    """The `items` field of a hop line: null for none, else the ids as a JSON list."""
    if not items:
        return "null"
    if all(map(is_, map(type, items), repeat(int))):  # ints (not bools): checked in C
        return f"[{','.join(map(int.__repr__, items))}]"
    return dumps(list(items))


def has_text(leaves: Sequence[Leaf]) -> bool:
    """Whether a payload of these leaves gets a `t` line: strings or floats, named by their
    objects, or lists of ints, by the list (`flowmap.capture.text_identity`)."""
    return any(leaf[1] == "str" or leaf[1] == "float" or (leaf[1] == "int" and leaf[0][-3:] == "[*]")
               for leaf in leaves)


def _opt(n: int | None) -> str:
    return "null" if n is None else str(int(n))


def _clamped(n: int | None) -> str:
    return "null" if n is None else str(min(n, tf.MAX_INT))


def _number(x: float) -> str:
    """A finite number as JSON, as `json.dumps` writes it."""
    return float.__repr__(x) if type(x) is float else int.__repr__(int(x))


def clamp_number(x: float) -> float:
    """`x` within what a trace holds (a sum of samples can overflow past it)."""
    return min(max(x, -tf.MAX_NUMBER), tf.MAX_NUMBER)


class TraceWriter(StorageTable):
    """The interning tables of one shard, and a method per line kind that writes it (its
    storages' ids: `flowmap.writer.storage_table`)."""

    def __init__(self, write: Sink, emit: Sink | None = None) -> None:
        super().__init__(write)
        self.emit = write if emit is None else emit
        self.lock = threading.Lock()
        self.strings: dict[str, int] = {}
        self.schemas: dict[tuple[Leaf, ...], int] = {}
        self.seams: dict[tuple[str, str, str], str] = {}  # -> "src,dst,name" string ids
        # Per seam, the last hop's [leaves, schema id, "seam,schema" text]: a seam mostly
        # repeats its schema, and comparing with the last one spares hashing every leaf.
        # The leaves are the last hop's even when equal to the ones before, so that a
        # describer that hands out its last leaf tuples again compares by identity.
        self.last_schema: dict[str, list[Any]] = {}
        self.id_texts: dict[str, str] = {}  # a string (a transport) -> its id as text

    # -- interning ------------------------------------------------------------
    def string_id(self, s: str) -> int:
        """The id of `s`, written as an `s` line the first time."""
        i = self.strings.get(s)
        if i is None:
            i = len(self.strings)
            self.strings[s] = i
            text = s if len(s) <= MAX_NAME else f"{s[:MAX_NAME]}…[{len(s) - MAX_NAME} more]"
            self.write(dumps([tf.STRING, i, text]))
        return i

    def id_text(self, s: str) -> str:
        """`string_id(s)` as text, formatted once per string (a hop line names its transport)."""
        text = self.id_texts[s] = str(self.string_id(s))
        return text

    def schema_id(self, leaves: Sequence[Leaf]) -> int:
        """The id of a payload schema, written as an `S` line the first time."""
        key = tuple(leaves)
        i = self.schemas.get(key)
        if i is None:
            i = len(self.schemas)
            self.schemas[key] = i
            sid = self.string_id
            enc = [
                [sid(p), k, list(shape), sid(dt), sid(dev), nb, cnt, list(dims) if dims else None]
                for (p, k, shape, dt, dev, nb, cnt, dims) in leaves
            ]
            self.write(dumps([tf.SCHEMA, i, enc]))
        return i

    def seam(self, src: str, dst: str, name: str) -> str:
        """The `src,dst,name` string ids of a seam's lines, interned at its first event."""
        seam = self.seams.get((src, dst, name))
        if seam is None:
            seam = self.seams[(src, dst, name)] = (
                f"{self.string_id(src)},{self.string_id(dst)},{self.string_id(name)}")
        return seam

    def seam_schema(self, seam: str, leaves: Sequence[Leaf]) -> int:
        """The schema id of a hop of `seam` (as `seam` returns it) carrying `leaves`."""
        last = self.last_schema.get(seam)
        if last is not None and last[0] == leaves:  # equal by value: nothing goes stale
            last[0] = leaves
            return last[1]  # type: ignore[no-any-return]
        schema = self.schema_id(leaves)
        self.last_schema[seam] = [leaves, schema, f"{seam},{schema}", has_text(leaves)]
        return schema

    def origin(self, storage: str, owner: str) -> None:
        """An `o` line: `owner` made what the storage `storage` holds, before the hop that
        first carries it (before the recording opened, or written in place since its last)."""
        self.write(f'["{tf.ORIGIN}",{storage},{self.string_id(owner)}]')

    # -- header and end ---------------------------------------------------------
    def header(self, fields: dict[str, Any]) -> None:
        """Line 1 of a shard (`trace_format` lists its fields)."""
        self.write(dumps({tf.HEADER: tf.MAGIC, "schema": tf.SCHEMA_VERSION, **fields}))

    def end_line(self, t_us: int, events: int, errors: int) -> str:
        """The last line of a cleanly closed shard (returned: a tracer that stops for a full
        disk writes it into the room it kept)."""
        return dumps([tf.END, t_us, {"events": events, "errors": errors}])

    def end(self, t_us: int, events: int, errors: int) -> None:
        self.write(self.end_line(t_us, events, errors))

    def error_line(self, t_us: int, message: str) -> str:
        return dumps([tf.ERROR, t_us, message])

    def error(self, t_us: int, message: str) -> None:
        """A note of a tracer error (not an event: it is counted apart)."""
        self.write(self.error_line(t_us, message))

    # -- events -------------------------------------------------------------------
    def hop(self, t_us: int, src: str, dst: str, name: str, leaves: Sequence[Leaf], nbytes: int,
            storages: str, step: int | None, version: int | None, transport: str,
            items: str) -> bool:
        """An `h` line. `storages` is `storage_ids`' text; `items` the JSON of the ids
        (`items_json`). Returns whether its schema has a string leaf (known per schema)."""
        seam = self.seams.get((src, dst, name)) or self.seam(src, dst, name)
        last = self.last_schema.get(seam)  # `seam_schema`, inlined: this runs once per hop
        if last is not None and last[0] == leaves:
            last[0] = leaves
        else:  # `seam_schema`'s miss: a new schema is looked up once
            schema = self.schema_id(leaves)
            last = self.last_schema[seam] = [leaves, schema, f"{seam},{schema}", has_text(leaves)]
        self.emit(
            f'["h",{t_us},{last[2]},{nbytes},[{storages}],'
            f"{'null' if step is None else int(step)},"
            f"{'null' if version is None else int(version)},"
            f"{self.id_texts.get(transport) or self.id_text(transport)},{items}]"
        )
        return last[3]  # type: ignore[no-any-return]

    def send_half(self, t_us: int, src: str, dst: str, name: str, leaves: Sequence[Leaf],
                  nbytes: int, storages: str, step: int | None, version: int | None,
                  transport: str, items: str, channel: str, key: str,
                  wire_bytes: int | None) -> bool:
        """An `x` line: a hop to `dst` unless a receive half on `channel` with `key` joins it.
        Returns whether its schema has strings or floats (as `hop` does)."""
        seam = self.seam(src, dst, name)
        self.emit(
            f'["{tf.SEND_HALF}",{t_us},{seam},{self.seam_schema(seam, leaves)},{int(nbytes)},'
            f"[{storages}],{_opt(step)},{_opt(version)},{self.string_id(transport)},{items},"
            f"{self.string_id(channel)},{dumps(key)},{_opt(wire_bytes)}]"
        )
        return self.last_schema[seam][3]  # type: ignore[no-any-return]

    def receive_half(self, t_us: int, owner: str, name: str, transport: str, channel: str,
                     key: str, wire_bytes: int | None, storages: str = "",
                     leaves: Sequence[Leaf] = (), texts: Sequence[int] = ()) -> None:
        """A `y` line: `owner` took the message `key` from `channel`; `storages` (`storage_ids`'
        text) names the storages of what it unpickled, so the same data sent on is known;
        `leaves`, what it unpickled, when more than bytes, and `texts` the ids of its strings
        and floats (`text_keys`), with leaves only."""
        sid = self.string_id
        tail = (f",[{storages}],{self.schema_id(leaves)}" if leaves
                else f",[{storages}]" if storages else "")
        if texts and leaves:
            tail += f',[{",".join(map(int.__repr__, texts))}]'
        self.emit(f'["{tf.RECEIVE_HALF}",{t_us},{sid(owner)},{sid(name)},{sid(transport)},'
                  f"{sid(channel)},{dumps(key)},{_opt(wire_bytes)}{tail}]")

    def counter(self, t_us: int, name: str, value: float, owner: str) -> None:
        """A `c` line; `value` finite (a float is written as `json.dumps` writes one)."""
        get = self.strings.get
        self.emit(f'["{tf.COUNTER}",{t_us},{get(name) or self.string_id(name)},'
                  f'{_number(value)},{get(owner) or self.string_id(owner)}]')

    def mark(self, t_us: int, name: str, owner: str) -> None:
        self.emit(f'["{tf.MARK}",{t_us},{self.string_id(name)},{self.string_id(owner)}]')

    def drop(self, t_us: int, owner: str, reason: str, items: list[Any] | None) -> None:
        self.emit(dumps([tf.DROP, t_us, self.string_id(owner), self.string_id(reason), items]))

    def step(self, t_us: int, step: int | None) -> None:
        self.emit(dumps([tf.STEP, t_us, step]))

    def leaf_notes(self, t_us: int, src: str, dst: str, name: str, transport: str,
                   step: int | None, notes: list[list[Any]]) -> None:
        """An `n` line: what the schema of the hop just written cannot say about its tensors."""
        sid = self.string_id
        self.emit(dumps([tf.LEAF_NOTES, t_us, sid(src), sid(dst), sid(name), sid(transport), step,
                         notes]))

    def text_keys(self, t_us: int, src: str, dst: str, name: str, keys: list[int]) -> None:
        """A `t` line: the ids of the strings the hop just written carried."""
        self.emit(f'["{tf.TEXT_KEYS}",{t_us},{self.seam(src, dst, name)},'
                  f'[{",".join(map(int.__repr__, keys))}]]')

    def content_windows(self, t_us: int, src: str, dst: str, name: str,
                        windows: list[list[Any]]) -> None:
        """A `w` line: the content windows of the arrays the send half just written carried."""
        self.emit(f'["{tf.WINDOWS}",{t_us},{self.seam(src, dst, name)},{dumps(windows)}]')

    def value_figures(self, t_us: int, src: str, dst: str, name: str, transport: str,
                      step: int | None, figures: list[list[Any]]) -> None:
        """A `v` line: value figures of a sampled hop (`flowmap trace --values`)."""
        sid = self.string_id
        self.emit(dumps([tf.VALUES, t_us, sid(src), sid(dst), sid(name), sid(transport), step,
                         figures]))

    # -- folded events (`flowmap trace --aggregate`) ------------------------------
    def hop_fold(self, src: str, dst: str, name: str, leaves: Sequence[Leaf], step: int | None,
                 transport: str, tally: HopTally) -> None:
        """An `a` line: the hops of one seam, step and transport, folded into `tally`."""
        self.emit(f'["{tf.AGGREGATE}",{tally.t_last},{self._seam_schema(src, dst, name, leaves)},'
                  f"{_opt(step)},{self.string_id(transport)},{_tally_figures(tally)}]")

    def send_fold(self, src: str, dst: str, name: str, leaves: Sequence[Leaf], step: int | None,
                  transport: str, channel: str, tally: HopTally) -> None:
        """An `X` line: send halves on `channel` folded into `tally`."""
        self.emit(f'["{tf.SEND_FOLD}",{tally.t_last},{self._seam_schema(src, dst, name, leaves)},'
                  f"{_opt(step)},{self.string_id(transport)},{_tally_figures(tally)},"
                  f"{self.string_id(channel)}]")

    def receive_fold(self, t_us: int, owner: str, name: str, transport: str, channel: str,
                     step: int | None, count: int, wire_bytes_sum: int | None,
                     t_first_us: int) -> None:
        """A `Y` line: `count` receive halves `owner` took from `channel`."""
        sid = self.string_id
        self.emit(f'["{tf.RECEIVE_FOLD}",{t_us},{sid(owner)},{sid(name)},{sid(transport)},'
                  f"{sid(channel)},{_opt(step)},{count},{_clamped(wire_bytes_sum)},{t_first_us}]")

    def counter_fold(self, t_us: int, name: str, owner: str, step: int | None, count: int,
                     total: float, least: float, largest: float, last: float,
                     t_first_us: int) -> None:
        """A `C` line: `count` samples of a counter."""
        sid = self.string_id
        self.emit(f'["{tf.COUNTER_FOLD}",{t_us},{sid(name)},{sid(owner)},{_opt(step)},{count},'
                  f"{_number(clamp_number(total))},{_number(clamp_number(least))},"
                  f"{_number(clamp_number(largest))},{_number(clamp_number(last))},{t_first_us}]")

    def mark_fold(self, t_us: int, name: str, owner: str, step: int | None, count: int,
                  t_first_us: int) -> None:
        """An `M` line: `count` phase markers."""
        self.emit(f'["{tf.MARK_FOLD}",{t_us},{self.string_id(name)},{self.string_id(owner)},'
                  f"{_opt(step)},{count},{t_first_us}]")

    def drop_fold(self, t_us: int, owner: str, reason: str, step: int | None, count: int,
                  num_items: int, t_first_us: int) -> None:
        """A `D` line: `count` drops naming `num_items` item ids."""
        self.emit(f'["{tf.DROP_FOLD}",{t_us},{self.string_id(owner)},{self.string_id(reason)},'
                  f"{_opt(step)},{count},{min(num_items, tf.MAX_INT)},{t_first_us}]")

    def _seam_schema(self, src: str, dst: str, name: str, leaves: Sequence[Leaf]) -> str:
        return f"{self.seam(src, dst, name)},{self.schema_id(leaves)}"


def _tally_figures(t: HopTally) -> str:
    """The fields from `hops` to `t_first_us` that `a` and `X` lines share."""
    return (f"{t.hops},{min(t.nbytes_sum, tf.MAX_INT)},{t.nbytes_min},{t.nbytes_max},"
            f"{_clamped(t.wire_bytes_sum)},{min(t.num_items, tf.MAX_INT)},{_opt(t.version_min)},"
            f"{_opt(t.version_max)},{t.t_first}")
