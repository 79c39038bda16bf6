"""Write the events of transport capture into this process's shard.

A transport hop is recorded where the real values are: the sender knows the
payload, the receiver knows who it is. When one side cannot learn the other
(a queue's consumer is whoever calls `get`), each side writes a *half*: the
send half carries the payload's description, the receive half only who got
it; both carry the channel and a message key (a digest of the bytes that
crossed, or a sequence number), and the reader joins them into hops
(`flowmap.read.halves`). Hops whose both ends are known (collectives) are
plain hop events, written with the byte count the transport moved.

These functions write through the shard's `TraceWriter` (under its lock),
so a half costs what a hop costs. They never raise: the callers wrap
them, and count failures with `Tracer.error`.
"""

from __future__ import annotations

import time
import zlib
from typing import TYPE_CHECKING, Any

from flowmap import trace_format as tf
from flowmap.capture import describe_lazy, state, text_identity
from flowmap.capture.tracer import Tracer
from flowmap.integrations.transports import number_text, relay_bytes
from flowmap.trace_format import UNTRACED as UNTRACED  # re-exported: the transports name it
from flowmap.writer.encoder import has_text, items_json
from flowmap.writer.storage_refs import windows_of

if TYPE_CHECKING:
    from flowmap.capture.describe import Description

ARRAYS = ("tensor", "ndarray")
NOW = object()  # `send_half(step=)` not given: the process's step when it is recorded


def describe(payload: Any) -> Description:
    """`payload` described. The describers are imported at the first message, not
    when the hook is armed: importing torch or multiprocessing arms a hook in every
    traced child, and most of those children never send a message."""
    return describe_lazy.describe(payload, None)


# The key of raw frames received (no tensor, no holder: each gets an id of its own), named
# so that bytes a relay sends on that hold their sample carry that id (`relay_bytes`)
RAW_FRAMES = ("raw frames",)
# A message key digests the head and the tail of the bytes and their length:
# bounded cost for a GB pickle, and two messages on one channel that agree
# there and differ only in the middle are matched in send order anyway.
KEY_SPAN = 4096


def tracer() -> Tracer | None:
    """The tracer of this process, opening a forked child's shard if it is still pending."""
    t = state.tracer
    if t is None or type(t) is Tracer:
        return t
    getattr(t, "events", None)  # a forked child's placeholder opens the real shard
    t = state.tracer
    return t if type(t) is Tracer else None


def error(exc: BaseException) -> None:
    t = state.tracer
    if t is not None:
        t.error(exc)


class MessageKey:
    """Length and CRC of the frames of one message, fed frame by frame."""

    __slots__ = ("nbytes", "crc")

    def __init__(self) -> None:
        self.nbytes = 0
        self.crc = 0

    def add(self, data: Any) -> int:
        """Fold one buffer in; returns its length in bytes."""
        m = relay_bytes.byte_view(data)
        n = m.nbytes
        self.nbytes += n
        if n <= 2 * KEY_SPAN:
            self.crc = zlib.crc32(m, self.crc)
        else:
            self.crc = zlib.crc32(m[n - KEY_SPAN:], zlib.crc32(m[:KEY_SPAN], self.crc))
        return n

    def text(self) -> str:
        return f"{self.nbytes:x}-{self.crc:08x}"


def key_of(data: Any) -> tuple[str, int]:
    """The message key of one buffer, and its length."""
    k = MessageKey()
    n = k.add(data)
    return k.text(), n


def _t_us(t: Tracer, t_ns: int) -> int:
    return max(0, (t_ns - t.t0_ns) // 1000)


def hop(src: str, dst: str, name: str, d: Description, nbytes: int, transport: str,
        t_ns: int, step: Any = NOW) -> None:
    """A hop whose both ends are known, carrying `nbytes` (what the transport moved).

    `step`: the step it happened in (a collective read later from the Flight
    Recorder); by default the process's step now."""
    t = tracer()
    if t is None:
        return
    if t.sink.hop(
        src, dst, name, d, (), None if step is NOW else step, None, transport,
        _t_us(t, t_ns), nbytes, exact_step=step is not NOW
    ):
        return  # folded (`trace --aggregate`, past the detail window)
    w = t.writer
    with w.lock:
        if not t.closed:
            ids = w.storage_ids(d.storages, d.holders, src, dst)
            w.acted(state.current_owner.get())
            w.hop(_t_us(t, t_ns), src, dst, name, d.leaves, int(nbytes), ids,
                  t.step if step is NOW else step, None, transport, "null")


def send_half(src: str, fallback: str, name: str, d: Description, nbytes: int, transport: str,
              channel: str, key: str, wire: int | None, t_ns: int, step: Any = NOW,
              items: list[Any] | None = None, payload: Any = None, relayed: str = "",
              copied: str = "", frame: Any = None) -> None:
    """The sender's half: a hop to `fallback` unless a receive half on `channel`/`key` joins it.

    `step` is the step the message was sent in (a queue's feeder thread records it
    later, when the sender may be in the next step); by default the process's step now.
    `items`: the ids the program tagged the message with (`flowmap.tag_items`). `payload`,
    what was sent, names its strings and floats (`Tracer.name_objects`). `relayed`: the
    storage ids raw bytes carry on where the payload has no storage (`relay_bytes`);
    `copied`, those of a message received that the payload copies into storages of its
    own, none of them linked to it otherwise (`relay_bytes.copied`). `frame`: the bytes the
    transport serialised the payload as, where its text may be numbers (`number_text`).
    """
    t = tracer()
    if t is None:
        return
    if step is NOW:
        step = t.step
    if t.sink.send_half(
        src, fallback, name, d, nbytes, transport, channel, wire, _t_us(t, t_ns), step
    ):
        return  # folded (`trace --aggregate`, past the detail window)
    windows = _windows(d, transport) if d.holders else None
    w = t.writer
    with w.lock:
        if not t.closed:
            t_us = _t_us(t, t_ns)
            ids = (w.storage_ids(d.storages, d.holders, src, fallback, described_before=True,
                                 content=True) if d.storages else relayed)
            if copied and ids and set(ids.split(",")).isdisjoint(copied.split(",")):
                ids = copied  # storages of its own, holding what it received: a copy
            w.acted(state.current_owner.get())
            if w.send_half(t_us, src, fallback, name, d.leaves, nbytes, ids, step, None, transport,
                           items_json(items), channel, key, wire) and payload is not None:
                t.name_objects(t_us, src, fallback, name, payload)
            if windows:
                w.content_windows(t_us, src, fallback, name, windows)
    if frame is not None and wire is not None:
        found = number_text.note(d.leaves, frame, wire)
        if found is not None:
            t.notes(src, fallback, name, transport, step, [found])


MAX_WINDOWED = 8  # arrays of a message whose content windows are read, the first


def _windows(d: Description, transport: str) -> list[list[Any]] | None:
    """`[path, crcs]` of the arrays a message's transport serialises (`storage_refs.windows_of`):
    numpy arrays always, tensors where it pickles them (not where it moves them into shared
    memory, nor a device's); only where each array leaf is one array (no folded list)."""
    arrays = [leaf for leaf in d.leaves if leaf[1] in ARRAYS]
    if len(arrays) != len(d.holders) or any(leaf[6] != 1 for leaf in arrays):
        return None
    tensors = transport in (tf.ZMQ, tf.PICKLE)
    out = []
    for leaf, holder in zip(arrays[:MAX_WINDOWED], d.holders):
        crcs = windows_of(holder, tensors)
        if crcs:
            out.append([leaf[0], crcs])
    return out or None


def receive_half(owner: str, name: str, transport: str, channel: str, key: str,
                 wire: int | None, t_ns: int, got: Any = None,
                 sample: relay_bytes.Samples | None = None) -> None:
    """The receiver's half: who got the message with `key` on `channel`.

    `got`, what it unpickled, is described (metadata only) for its storages: the
    receiver's ids of the very tensors it got, so that the same data sent on from here
    (a relay, re-wrapped or not) is known leaf by leaf, across the process boundary; and
    for its leaves, which say what a sender of raw bytes could not. `sample`, of the
    message's bytes (`relay_bytes`), finds those storages in raw bytes sent on, or in a
    copy of them."""
    t = tracer()
    if t is None:
        return
    if t.sink.receive_half(
        owner, name, transport, channel, wire, _t_us(t, t_ns)
    ):
        return
    d = describe(got) if got is not None else None
    objects = text_identity.strings_of(got) if d is not None and has_text(d.leaves) else []
    w, ids = t.writer, ""
    with w.lock:
        if not t.closed:
            leaves = d.leaves if d is not None and not bytes_only(d.leaves) else ()
            ids = w.arrived_ids(d.storages, d.holders, owner) if d is not None else ""
            if not ids and sample is not None and not leaves:  # raw frames: their content
                ids = w.storage_ids([RAW_FRAMES], None)  # an id of its own, for a relay's
            w.acted(state.current_owner.get())
            w.receive_half(_t_us(t, t_ns), owner, name, transport, channel, key, wire, ids,
                           leaves, t.texts.keys(objects) if objects and leaves else ())
    relay_bytes.keep(sample, ids, wire or 0, d.holders if d is not None else (), owner, t_ns)


def bytes_only(leaves: Any) -> bool:
    """Whether a payload's leaves are raw bytes alone (frames): lengths, and no shape."""
    return all(leaf[1] == "bytes" for leaf in leaves)


def notes(src: str, dst: str, name: str, transport: str, step: int | None,
          found: list[list[Any]]) -> None:
    """The leaf notes of a message (`flowmap.capture.leaf_notes`, taken before it was sent)."""
    t = tracer()
    if t is not None:
        t.notes(src, dst, name, transport, step, found)


def values(src: str, name: str, transport: str, step: int | None, payload: Any) -> None:
    """Value figures of a message, when `trace --values` samples it (flowmap/capture/values.py)."""
    t = tracer()
    if t is not None:
        t.values(src, UNTRACED, name, transport, step, payload)


def now_ns() -> int:
    return time.monotonic_ns()
