"""The trace file format, shared by the writer (capture) and the reader (model).

A run is a directory. Each traced process streams one *shard* into it:
`<host>-<pid>-<seq>.flowmap.jsonl`, one JSON array per line. JSON lines are
self-describing, safe to load (no pickle, loading runs no code), and survive a
SIGKILL: the reader keeps every complete line and says the shard was cut.

Line 1 is the header object; every later line is an event array whose first
element is its kind:

    {"flowmap": "trace", "schema": 1, "pid", "ppid", "host", "argv",
     "t0_mono_ns", "t0_wall_ns", "process"}         header
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
    ["y", t_us, owner, name, transport, channel, key, wire_bytes]
                                                    receive half of a transport hop
    ["end", t_us, {"events": n, "errors": n}]       clean close

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
`wire_bytes` is what crossed the channel (the pickled size), or null.
"""

from __future__ import annotations

SCHEMA_VERSION = 1
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
END = "end"
