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
lies; at a quarter or three quarters where the middle is too uniform to tell data
apart (zeros, small integers, an opcode run). Samples stay in this process's memory,
at most `MAX_KEPT`, and are never written to the trace. Cost: a slice and a set of
64 bytes per large message received (about 1 µs); one substring search of the sent
bytes per kept sample per raw send of at least `MIN_BYTES`, in a process that kept
any (about 0.1 ms per MiB each; docs/performance.md).
"""

from __future__ import annotations

from typing import Any

from flowmap.capture import forksafe

MIN_BYTES = 64 * 1024
SAMPLE = 64
MIN_DISTINCT = 24  # byte values a sample must hold: random floats hold 40-60, zeros one
MAX_KEPT = 4  # the latest messages: a relay sends on what it just got; each costs a search

_kept: list[tuple[bytes, str]] = []  # (sample, the storage ids its message arrived as)
forksafe.at_fork(after_in_child=_kept.clear)  # the ids are the parent's shard's


def sample_of(data: Any) -> bytes | None:
    """The sample of a received message's bytes, None where it is small or too uniform."""
    try:
        m = data if isinstance(data, memoryview) else memoryview(data)
        if m.format != "B" or m.ndim != 1:
            m = m.cast("B")
        n = m.nbytes
        if n < MIN_BYTES:
            return None
        for at in (n // 2, n // 4, 3 * n // 4):
            sample = bytes(m[at : at + SAMPLE])
            if len(set(sample)) >= MIN_DISTINCT:
                return sample
    except (TypeError, ValueError):  # a buffer that is not contiguous bytes
        return None
    return None


def keep(sample: bytes | None, storages: str) -> None:
    """Keep a received message's sample with the ids (`storage_ids`' text) it arrived as."""
    if sample is not None and storages:
        _kept.append((sample, storages))
        del _kept[:-MAX_KEPT]


def carried(buf: Any) -> str:
    """The storage ids of the kept messages found in `buf` (raw bytes about to be sent),
    as `storage_ids`' text; "" for none."""
    if not _kept or type(buf) not in (bytes, bytearray) or len(buf) < MIN_BYTES:
        return ""
    found: dict[str, None] = {}
    for sample, ids in list(_kept):
        if sample in buf:
            found[ids] = None
    return ",".join(found)
