"""Bytes a process received, found again in raw bytes it sends: a relay that serialises
what it got itself.

A relay that unpickles a message and sends what it got as bytes of its own
(`pickle.dumps` then `Connection.send_bytes`; msgpack; a framework's codec) sends the
same data on under no object the tracer sees: the receiver loads those bytes itself.
Identity then rests on content, read only from bytes a transport already serialised:
as a message of at least `MIN_BYTES` arrives, a sample of it is kept with the ids of
the storages its receiver unpickled, and a send of raw bytes that contains a kept
sample carries those storages on (`flowmap.findings.pass_through` then sees them leave).

The sample is 64 bytes at the middle of the message, where its largest array's data
lies; at a quarter or three quarters, or another eighth, where the middle is too uniform
to tell data apart (zeros, small integers, an opcode run) or is a name (a serialiser's
header, as torch's pickle of a tensor writes before its data). A relay that copies what
it got and sends the copy as an object (`send_pyobj` of a `copy.deepcopy`) is found the
same way, by all three samples, a size within a tenth and as many storages (`copied`).
Samples stay in this process's memory, at most `MAX_KEPT`, and are never written to the
trace. Cost: up to seven 64-byte slices read per large message received (about 6 µs);
one substring search of the sent bytes per kept sample per raw send of at least
`MIN_BYTES`, and per `send_pyobj` of as much by the stage that kept it, in a process that
kept any (about 0.2 ms per MiB each; docs/performance.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from flowmap import trace_format as tf
from flowmap.capture import forksafe
from flowmap.writer.storage_refs import array_root, storage_of

MIN_BYTES = tf.RELAY_SAMPLE_BYTES
SAMPLE = 64
MIN_DISTINCT = 24  # byte values a sample must hold: random floats hold 40-60, zeros one
MAX_KEPT = 4  # the latest messages: a relay sends on what it just got; each costs a search
MAX_SAMPLES = 3
# a name in the bytes: a serialiser's own header ("protocol_version", "little_endian"),
# the same in every message it writes, is no data; random data holds such a run rarely
_WORD = re.compile(rb"[A-Za-z_]{4}")

COPY_SPREAD = 0.1  # a message sent again, re-serialised: its size within this share

Samples = tuple[bytes, ...]
# (samples, the ids its message arrived as, its bytes, what its arrays' memory belongs to,
# who received it, when)
_kept: list[tuple[Samples, str, int, frozenset[int], str, int]] = []
forksafe.at_fork(after_in_child=_kept.clear)  # the ids are the parent's shard's


def byte_view(data: Any) -> memoryview:
    """`data` (bytes, a frame, a buffer) as one flat run of bytes, without a copy; raises
    TypeError or ValueError where it is not contiguous bytes."""
    m = data if isinstance(data, memoryview) else memoryview(data)
    return m if m.format == "B" and m.ndim == 1 else m.cast("B")


def sample_of(data: Any) -> Samples | None:
    """The samples of a received message's bytes, None where it is small or too uniform:
    up to `MAX_SAMPLES` windows, from the middle outwards, each where it tells data apart.
    The first says a relay's bytes carry the message; all of them, that a copy is all of
    it."""
    try:
        m = byte_view(data)
        n = m.nbytes
        if n < MIN_BYTES:
            return None
        found: list[bytes] = []
        for eighth in (4, 2, 6, 1, 3, 5, 7):
            sample = bytes(m[n * eighth // 8 : n * eighth // 8 + SAMPLE])
            if len(set(sample)) >= MIN_DISTINCT and _WORD.search(sample) is None:
                found.append(sample)
                if len(found) == MAX_SAMPLES:
                    break
    except (TypeError, ValueError):  # a buffer that is not contiguous bytes
        return None
    return tuple(found) or None


def keep(samples: Samples | None, storages: str, nbytes: int = 0,
         holders: Sequence[Any] = (), owner: str = "", t_ns: int = 0) -> None:
    """Keep a received message's samples with the ids (`storage_ids`' text) it arrived as,
    its size, what the memory of its arrays (`holders`) belongs to, who received it and
    when (`time.monotonic_ns`)."""
    if samples and storages:
        _kept.append((samples, storages, nbytes, memory_of(holders), owner, t_ns))
        del _kept[:-MAX_KEPT]


def memory_of(holders: Sequence[Any]) -> frozenset[int]:
    """The ids of the objects whose memory `holders` (tensors, arrays) lie in: a tensor's
    storage (one Python object per live storage), an array's first base that is no array.
    Views of a message's arrays lie in its memory: sent on, they are the message's data
    by identity, no copy of it. A storage freed since, whose id another took, only hides
    a copy (a missed link, never a false one)."""
    out = set()
    for h in holders:
        storage = storage_of(h)
        if storage is not None:
            out.add(id(storage))
        elif type(h).__name__ == "ndarray" and type(h).__module__ == "numpy":
            root = array_root(h)
            out.add(id(root if root.base is None else root.base))
    return frozenset(out)


def carried(buf: Any, since_ns: int | None = None) -> str:
    """The storage ids of the kept messages found in `buf` (raw bytes about to be sent,
    from `since_ns` on), as `storage_ids`' text; "" for none. A message received after
    the send began is not what it sends: the receiver's thread of these very bytes."""
    if not _kept or type(buf) not in (bytes, bytearray) or len(buf) < MIN_BYTES:
        return ""
    found: dict[str, None] = {}
    for samples, ids, _, _, _, t_ns in list(_kept):
        if (since_ns is None or t_ns < since_ns) and samples[0] in buf:
            found[ids] = None
    return ",".join(found)


def copied(buf: Any, storages: int, holders: Sequence[Any] = (), owner: str = "") -> str:
    """The ids a received message arrived as, where `buf` (the serialised bytes of an
    object about to be sent, holding `storages` tensors or arrays) is that message again:
    each of its samples found in it, its size within `COPY_SPREAD` and as many storages,
    none of them (`holders`) in its memory, and `owner` the one that received it (a rank
    thread's receipt of what its server sends again is no copy the server made).
    A relay that copies what it got (`copy.deepcopy`, `.clone()` of every tensor) and
    sends the copy sends the same data under storages of its own; one that changed a
    part of it, or computed something new of the same shapes, is no copy: "" then."""
    if not _kept or type(buf) not in (bytes, bytearray) or len(buf) < MIN_BYTES:
        return ""
    n = len(buf)
    for samples, ids, nbytes, memory, receiver, _ in reversed(_kept):
        if (receiver == owner and abs(n - nbytes) <= COPY_SPREAD * nbytes
                and ids.count(",") + 1 == storages and all(sample in buf for sample in samples)):
            return "" if memory & memory_of(holders) else ids
    return ""
