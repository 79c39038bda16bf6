"""The trace file format, shared by the writer (`flowmap.writer`) and the reader (model).

A run is a directory. Each traced process streams one *shard* into it:
`<host>-<pid>-<seq>.flowmap.jsonl`, one JSON array per line. JSON lines are
self-describing, safe to load (no pickle, loading runs no code), and survive a
SIGKILL: the reader keeps every complete line and says the shard was cut.

Line 1 is the header object; every later line is an event array whose first
element is its kind:

    {"flowmap": "trace", "schema": 1, "pid", "ppid", "host", "argv",
     "t0_mono_ns", "t0_wall_ns", "process", "boot_id", "pid_ns",
     "start_ticks", "run_process", "ray_node_id"}   header
    ["s", id, text]                                 interned string
    ["S", id, [[path, kind, shape, dtype, device, nbytes, count, dims], ...]]
                                                    interned payload schema
    ["h", t_us, src, dst, name, schema, nbytes, storages, step, version,
     transport, items]                              hop
    ["c", t_us, name, value, owner]                 counter sample
    ["m", t_us, name, owner]                        phase marker
    ["d", t_us, owner, reason, items]               items dropped
    ["p", t_us, step]                               current step changed
    ["e", t_us, message]                            tracer error (counted)
    ["x", t_us, src, dst, name, schema, nbytes, storages, step, version,
     transport, items, channel, key, wire_bytes]    send half of a transport hop
    ["y", t_us, owner, name, transport, channel, key, wire_bytes, storages, schema,
     texts]
                                                    receive half of a transport hop
    ["a", t_us, src, dst, name, schema, step, transport, hops, nbytes_sum,
     nbytes_min, nbytes_max, wire_bytes_sum, num_items, version_min,
     version_max, t_first_us]                       hops of one seam and step, folded
    ["n", t_us, src, dst, name, transport, step, notes]
                                                    leaf notes of the hop just recorded
    ["i", t_us, key, value]                         what this process learnt of itself
    ["v", t_us, src, dst, name, transport, step, figures]
                                                    value figures of a sampled hop (--values)
    ["t", t_us, src, dst, name, keys]               the strings the hop just recorded carried
    ["w", t_us, src, dst, name, windows]            content windows of the arrays it serialised
    ["b", storage, of]                              a view's storage id lies in storage `of`
    ["o", storage, owner]                           what a storage holds was made by `owner`
    ["end", t_us, {"events": n, "errors": n}]       clean close

Strings are UTF-8; a lone surrogate (a name decoded from bytes that are not
UTF-8, e.g. `os.fsdecode(b"\\xff")`) is written as its JSON escape `\\udcff`,
so the file stays valid UTF-8 and nothing is lost; readers show it as that
text. A mapped shard that was not closed ends in zero bytes: its content
ends at the first NUL. Every event is checked against `EVENTS` below.

`src`, `dst`, `name`, `transport`, `reason`, `owner`, and the strings inside
schemas are ids of interned strings; `storages` lists one storage id per
tensor leaf (ids are per shard). `t_us` is microseconds since the shard's
`t0_mono_ns`; the monotonic clock is shared by all processes of a host, which
is how shards are aligned on merge.

Halves come from transports where the sender cannot know its receiver (a
queue, a socket; `flowmap.integrations.transports`): the reader joins a send
half to the receive half with the same `channel` (interned) and `key` (a
string: digest of the bytes that crossed, or a sequence number) into one hop
`src -> owner`; a send half nobody received is a hop to its `dst`.
`wire_bytes` is what crossed the channel (the pickled size), or null. A
receive half's `storages` (optional) are the receiver's ids of the tensors it
unpickled, in leaf order: the same data sent on from there (a relay) shares them.
Its `schema` (optional) is what it unpickled, where that is more than bytes: a sender
that passed raw frames (`pickle.dumps` of a dict of arrays) has only their lengths,
so the joined hop takes the receiver's leaves. Its `texts` (optional) are the ids of
the strings and floats it unpickled, as a `t` line names a hop's: the same text sent
on from there is known, and text written there is not taken for it.

An `n` event follows a hop (or send half) that moved bytes (transport not
`ref`) when one of its tensors has something its schema cannot say
(flowmap/capture/leaf_notes.py): `notes` lists `[path, nbytes, storage_bytes,
real]` per such tensor, `storage_bytes` the storage behind a view when larger
than the view (it travels whole through pickle and shared memory), `real` the
non-zero positions of a small CPU mask; either may be null. A fifth, `numbers`
(traces before it have four), is the numbers a text leaf (a `str` or `bytes` of JSON)
holds, read from the frame the transport serialised (flowmap/integrations/transports/
number_text.py); the other two are then null. The findings `view`, `padding` and
`serialisation` read them. Under `--aggregate` a process writes them in
its detail window only.

The header names the process for good (flowmap/capture/identity.py): its
`host`, `pid`, and what tells equal names and pids apart — `boot_id`,
`pid_ns` (the pid namespace: containers all have a pid 1), `start_ticks`
(a reused pid) and `run_process` (random); `merge` may add `host_tag` to tell
apart two hosts alike in all of these (flowmap/read/merge.py); a Ray worker's
header has its `ray_node_id`. An `i` event adds what the
process learns later, as plain text: `owner` (an owner whose code runs in
this process, e.g. a Ray actor) and `ray_node_id` (the Ray node it runs on).

A `b` line says that the storage id `storage`, new for a view that starts inside a
storage already named (and alive) under id `of`, is part of that data: a row of a
received batch sent on starts elsewhere than the batch but is its data. Storage ids
stay one per start address (two slices of one buffer sent to two ranks are not the
same data); readers that follow data (pass-through, the flow) look through `b`.

An `o` line names who made a storage the recording met before any hop carried it: a
run with no seam map (`flowmap.discover.auto`) records only after its first step was
watched, and data made in that step (experiences in a replay buffer, sampled later) would
otherwise read as made by the first stage that hands it on. The watch saw which stage
returned it, and the line says so, once per storage, as recording opens; readers that
follow data (the flow) take that stage as its producer.

A `t` event follows a hop or send half of text (strings or floats, beside tensors or not) with
`keys`, ids of the first strings and floats it carried (flowmap/capture/text_identity.py): ids per shard, one
per string object, never given to two strings (the writer holds each string while
it keeps its id). A relay hands on the strings it got, under the same ids; text a
stage writes (completions for prompts) has new ones. The flow reads them.

A `w` event follows a send half whose transport serialised its arrays (a queue's or
pipe's pickle, ZMQ's `send_pyobj`): `windows` lists `[path, crcs]` per array leaf, the
CRC-32 of the 16 bytes at each of `WINDOW_OFFSETS` that fits in the array (bytes the
transport copied anyway; flowmap/writer/storage_refs.py). Two messages whose windows
agree wherever both have one, past the first, start with the same data: `prefix_resend`
finds the turns of a resent prefix (each turn the earlier turns again) by them.

A `v` event is written only under `flowmap trace --values`, which reads data
(flowmap/capture/values.py): after a sampled hop that moved bytes, `figures`
lists `[path, min, max, sum, zero_tail, elements, filled]` per host array or list of
numbers (`sum` only for lists and short integer vectors, `zero_tail` and `filled` only
for arrays: the elements in each row's trailing zeros, or leading zeros where a
batch's rows all end filled; the elements at positions that hold something). Traces
written before `filled` have six. The findings `padding` and `wide_ids` read them.

An `a` event stands for every hop of one seam, step and transport that a
process folded in memory (`flowmap trace --aggregate`, past its detail
window; flowmap/capture/fold.py) instead of writing them: their count, the
sum, least and largest of their bytes, how many item ids they carried, their
weight versions' range, and the times of the first and last (`t_us`). Its
`schema` is the seam's leaves merged over the hops folded so far (a dim that
varied is [min, max]).

The other folded events follow the same rule for what a process records past
its detail window, one line per (kind's key, step) and boundary: `X` is an
`a` of send halves with their channel, `Y` counts the receive halves an
owner took from a channel (the reader joins the two by channel, see
flowmap/read/halves.py), `C` holds a counter's samples as count, sum,
least, largest and last value, `M` counts phase markers, and `D` counts
drop events and the item ids they named. `step` is the process's step when
they were recorded.
"""

from __future__ import annotations

import re

SCHEMA_VERSION = 1
# Messages of at least this many bytes have their serialised content sampled as they arrive
# (flowmap/integrations/transports/relay_bytes.py): raw bytes relayed verbatim carry the
# ids they arrived as, so a raw relay of fewer bytes is the one identity cannot see.
RELAY_SAMPLE_BYTES = 64 * 1024
MAGIC = "trace"
SHARD_SUFFIX = ".flowmap.jsonl"
RUN_META = "run.json"

HEADER = "flowmap"
STRING = "s"
SCHEMA = "S"
HOP = "h"
COUNTER = "c"
MARK = "m"
DROP = "d"
STEP = "p"
ERROR = "e"
SEND_HALF = "x"
RECEIVE_HALF = "y"
AGGREGATE = "a"
SEND_FOLD = "X"
RECEIVE_FOLD = "Y"
COUNTER_FOLD = "C"
MARK_FOLD = "M"
DROP_FOLD = "D"
LEAF_NOTES = "n"
PROCESS_INFO = "i"
VALUES = "v"
TEXT_KEYS = "t"
WINDOWS = "w"
PART = "b"
ORIGIN = "o"
END = "end"

# -- the event table -----------------------------------------------------------
# Each event kind lists its fields after the kind, each with a field type that
# the reader checks (`flowmap.read.validate`). To add a kind: add its letter
# above, its row here, and a record builder in `flowmap.read.reader`. Fields
# from `OPTIONAL` on may be missing (older writers); extra fields are ignored
# (newer minor writers); kinds not in the table are skipped.
ID = "id"  # a new interned id: 0 <= int < MAX_ID
TIME = "time"  # microseconds since t0: |int| <= MAX_TIME_US
STR_REF = "str"  # the id of a string interned earlier in the shard
SCHEMA_REF = "schema"  # the id of a payload schema interned earlier
COUNT = "count"  # 0 <= int <= MAX_INT
OPT_INT = "int?"  # null or |int| <= MAX_INT
NUMBER = "number"  # a finite int or float (no NaN, no infinity)
TEXT = "text"  # a string of at most MAX_TEXT characters
ITEMS = "items"  # null, or a list of at most MAX_ITEMS ints and strings
INTS = "ints"  # a list of at most MAX_ITEMS ints
LEAVES = "leaves"  # a schema's leaves: [[path, kind, shape, dtype, device, nbytes, count, dims]]
STATS = "stats"  # an object {"events": n, "errors": n}
FIGURES = "figures"  # [[path, min, max, sum or null, zero_tail or null, elements, filled]]
# [[path, [crc32 of the 16 bytes at each of WINDOW_OFFSETS that fit in the array]]]
WINDOW_LIST = "windows"
NOTES = "notes"  # [[path, nbytes, storage_bytes or null, real or null(, numbers)]] (MAX_LEAVES)

EVENTS: dict[str, tuple[tuple[str, str], ...]] = {
    STRING: (("id", ID), ("text", TEXT)),
    SCHEMA: (("id", ID), ("leaves", LEAVES)),
    HOP: (("t_us", TIME), ("src", STR_REF), ("dst", STR_REF), ("name", STR_REF),
          ("schema", SCHEMA_REF), ("nbytes", COUNT), ("storages", INTS), ("step", OPT_INT),
          ("version", OPT_INT), ("transport", STR_REF), ("items", ITEMS)),
    COUNTER: (("t_us", TIME), ("name", STR_REF), ("value", NUMBER), ("owner", STR_REF)),
    MARK: (("t_us", TIME), ("name", STR_REF), ("owner", STR_REF)),
    DROP: (("t_us", TIME), ("owner", STR_REF), ("reason", STR_REF), ("items", ITEMS)),
    STEP: (("t_us", TIME), ("step", OPT_INT)),
    ERROR: (("t_us", TIME), ("message", TEXT)),
    END: (("t_us", TIME), ("stats", STATS)),
    SEND_HALF: (("t_us", TIME), ("src", STR_REF), ("dst", STR_REF), ("name", STR_REF),
                ("schema", SCHEMA_REF), ("nbytes", COUNT), ("storages", INTS), ("step", OPT_INT),
                ("version", OPT_INT), ("transport", STR_REF), ("items", ITEMS),
                ("channel", STR_REF), ("key", TEXT), ("wire_bytes", OPT_INT)),
    RECEIVE_HALF: (("t_us", TIME), ("owner", STR_REF), ("name", STR_REF), ("transport", STR_REF),
                   ("channel", STR_REF), ("key", TEXT), ("wire_bytes", OPT_INT),
                   ("storages", INTS), ("schema", SCHEMA_REF), ("texts", INTS)),
    AGGREGATE: (("t_us", TIME), ("src", STR_REF), ("dst", STR_REF), ("name", STR_REF),
                ("schema", SCHEMA_REF), ("step", OPT_INT), ("transport", STR_REF),
                ("hops", COUNT), ("nbytes_sum", COUNT), ("nbytes_min", COUNT),
                ("nbytes_max", COUNT), ("wire_bytes_sum", OPT_INT), ("num_items", COUNT),
                ("version_min", OPT_INT), ("version_max", OPT_INT), ("t_first_us", TIME)),
    SEND_FOLD: (("t_us", TIME), ("src", STR_REF), ("dst", STR_REF), ("name", STR_REF),
                ("schema", SCHEMA_REF), ("step", OPT_INT), ("transport", STR_REF),
                ("hops", COUNT), ("nbytes_sum", COUNT), ("nbytes_min", COUNT),
                ("nbytes_max", COUNT), ("wire_bytes_sum", OPT_INT), ("num_items", COUNT),
                ("version_min", OPT_INT), ("version_max", OPT_INT), ("t_first_us", TIME),
                ("channel", STR_REF)),
    RECEIVE_FOLD: (("t_us", TIME), ("owner", STR_REF), ("name", STR_REF), ("transport", STR_REF),
                   ("channel", STR_REF), ("step", OPT_INT), ("count", COUNT),
                   ("wire_bytes_sum", OPT_INT), ("t_first_us", TIME)),
    COUNTER_FOLD: (("t_us", TIME), ("name", STR_REF), ("owner", STR_REF), ("step", OPT_INT),
                   ("count", COUNT), ("sum", NUMBER), ("min", NUMBER), ("max", NUMBER),
                   ("last", NUMBER), ("t_first_us", TIME)),
    MARK_FOLD: (("t_us", TIME), ("name", STR_REF), ("owner", STR_REF), ("step", OPT_INT),
                ("count", COUNT), ("t_first_us", TIME)),
    DROP_FOLD: (("t_us", TIME), ("owner", STR_REF), ("reason", STR_REF), ("step", OPT_INT),
                ("count", COUNT), ("num_items", COUNT), ("t_first_us", TIME)),
    PROCESS_INFO: (("t_us", TIME), ("key", TEXT), ("value", TEXT)),
    LEAF_NOTES: (("t_us", TIME), ("src", STR_REF), ("dst", STR_REF), ("name", STR_REF),
                 ("transport", STR_REF), ("step", OPT_INT), ("notes", NOTES)),
    VALUES: (("t_us", TIME), ("src", STR_REF), ("dst", STR_REF), ("name", STR_REF),
             ("transport", STR_REF), ("step", OPT_INT), ("figures", FIGURES)),
    TEXT_KEYS: (("t_us", TIME), ("src", STR_REF), ("dst", STR_REF), ("name", STR_REF),
                ("keys", INTS)),
    WINDOWS: (("t_us", TIME), ("src", STR_REF), ("dst", STR_REF), ("name", STR_REF),
              ("windows", WINDOW_LIST)),
    PART: (("storage", COUNT), ("of", COUNT)),
    ORIGIN: (("storage", COUNT), ("owner", STR_REF)),
}
OPTIONAL: dict[str, int] = {COUNTER: 4, MARK: 3, RECEIVE_HALF: 8}  # field index from which fields may be absent

# Where a serialised array's content windows lie (`w` lines): bytes from its start, each
# window 16 bytes; the same offsets in every message, so two messages compare where both fit
WINDOW_OFFSETS = (0, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
WINDOW_BYTES = 16

# Bounds a reader enforces; a line or value past them is a bad line.
MAX_LINE = 8 << 20  # bytes in one line
MAX_TEXT = 2 << 20  # characters in one string
MAX_ITEMS = 65_536  # entries of an items or storages list
MAX_LEAVES = 4096  # leaves of one schema
MAX_ID = 1 << 31
MAX_INT = (1 << 63) - 1
MAX_TIME_US = 1 << 52  # ~140 years

# The transports a hop names (docs/architecture.md): how its payload moved. A seam map may
# name all but `zmq`, which is what the ZMQ integration records.
REF, COPY, SHM, PICKLE, RPC, COLLECTIVE = "ref", "copy", "shm", "pickle", "rpc", "collective"
ZMQ = "zmq"
CUDA_IPC = "cuda_ipc"
TRANSPORTS = (REF, COPY, SHM, PICKLE, RPC, COLLECTIVE, ZMQ, CUDA_IPC)
# The owner on the far side of a transport message whose other half was never traced: a
# send nobody traced received, a receipt whose sender was not traced.
UNTRACED = "(untraced)"
# A collective's group as an owner: `group[0,1]`, `group[0-7]` (its global ranks)
GROUP = "group["
# Hops a reader keeps one by one, for the whole run (shared among its shards); past it,
# hops are folded per seam and step. The built-in trainer's ~7,000 hops stay far inside it.
DETAIL_HOPS = 100_000
MAX_NUMBER = 1e300

# The bytes a hop line starts with, up to its time: how the follower of a growing shard
# (`flowmap.read.hop_lines`) finds hop lines without decoding them.
HOP_LINE_START = b'["' + HOP.encode() + b'",'
# ... and of the lines that record hops: a hop, and hops folded by --aggregate
HOP_LINE_STARTS = (HOP_LINE_START, b'["' + AGGREGATE.encode() + b'",')
_START = re.escape(HOP_LINE_START)
# A run of hop lines equal but for their time, each time as JSON writes an integer of at
# most 16 digits; groups: the first line's time, the bytes after it (newline included).
HOP_RUN = re.compile(_START + rb'(0|[1-9][0-9]{0,15})(,[^\n]*\n)(?:' + _START
                     + rb'(?:0|[1-9][0-9]{0,15})\2)*')
# The times of a run's lines after its first (a line's start follows a newline; the bytes
# after a time may hold `["h",` too, inside an item id)
HOP_NEXT_TIMES = re.compile(rb'\n' + _START + rb'([0-9]+)')
