"""Hops through pyzmq sockets.

pyzmq's `send`/`recv` live in its compiled backend; the Python socket class
(`zmq.sugar.socket.Socket`) adds `send_multipart`, `send_pyobj`,
`send_json`, `send_string` (and their `recv_` twins) on top of them. The
wrappers go on that class: the outermost call records, the `send`/`recv`
it makes only add their frames to the message. asyncio sockets
(`zmq.asyncio`) do their I/O through a plain shadow socket, so a send is
recorded there; a receipt that loads its frame (`recv_pyobj`) returns a future,
and is recorded when that is done, with the object it loaded (a relay's
receiver knows the tensors it got).

A message is one send half on the sending side and one receive half on each
receiving side, keyed by a digest of its frames (routing envelopes of ROUTER
sockets and REQ delimiters left out, so both ends see the same frames; frames
sent or received one by one before a whole-message call, a ROUTER's identity
then `send_pyobj`, begin that message) and
named `<TYPE> <endpoint>` of the socket that recorded it (`PUSH
tcp://127.0.0.1:5555`; a port from the OS's ephemeral range is written `*`, so
a seam keeps its name from run to run); the channel is the endpoint's port or path. `nbytes`
is the bytes of the frames the sender passed; the payload described is what
the program passed (frames, or the object of `send_pyobj`/`send_json`).
Nothing is recorded when a call raises (closed socket, `zmq.Again` on a
timeout or full queue): the exception reaches the program unchanged.
"""

from __future__ import annotations

import collections
import functools
import os
import threading
from collections.abc import Callable
from typing import Any

from flowmap.capture import importhook, item_tags, leaf_notes, state, values
from flowmap.capture.api import current_owner
from flowmap.integrations.transports import number_text, record, relay_bytes
from flowmap.integrations.transports.record import describe

SENDS = ("send_multipart", "send_pyobj", "send_json", "send_string", "send_serialized")
RECVS = ("recv_multipart", "recv_pyobj", "recv_json", "recv_string", "recv_serialized")
SNDMORE = 2  # zmq.SNDMORE
RCVMORE = 13  # zmq.RCVMORE
LAST_ENDPOINT = 32  # zmq.LAST_ENDPOINT
ROUTER = 6  # zmq.ROUTER
MAX_SOCKETS = 10_000

_tl = threading.local()
_endpoints: dict[int, list[str]] = {}  # socket address (shared with its shadows) -> endpoints
_partial: dict[int, _Message] = {}  # frames of a message sent or received frame by frame
# An asyncio socket's receipts whose frames its shadow has yet to take, oldest first
_awaited: dict[int, collections.deque[_Message]] = {}


class _Message:
    """One message being sent or received: its key, its bytes, what the program passed."""

    __slots__ = ("key", "nbytes", "frames", "envelope", "payload", "t_ns", "sample", "pickled",
                 "largest", "an_object")

    def __init__(self, router: bool, payload: Any = None) -> None:
        self.key = record.MessageKey()
        self.nbytes = 0
        self.frames = 0
        # ROUTER frames start with the peer's identity; then REQ's empty delimiter.
        self.envelope = 1 if router else 0
        self.payload = payload
        self.t_ns = record.now_ns()
        self.sample: relay_bytes.Samples | None = None  # of a large frame received (`relay_bytes`)
        self.pickled: Any = None  # the large frame an object was sent as (`relay_bytes.copied`)
        self.an_object = False  # sent by `send_pyobj`: its frame is the object serialised
        self.largest: Any = None  # the largest frame sent, of at least 1 KiB (`number_text`)

    def add(self, frame: Any) -> None:
        m = memoryview(frame)
        n = m.nbytes
        self.nbytes += n
        self.frames += 1
        if n >= relay_bytes.MIN_BYTES:
            if self.payload is None:
                if self.sample is None:
                    self.sample = relay_bytes.sample_of(m)
            elif self.an_object:
                self.pickled = frame
        if (n >= number_text.MIN_BYTES and self.payload is not None
                and (self.largest is None or n > memoryview(self.largest).nbytes)):
            self.largest = frame
        if self.envelope > 0:
            self.envelope -= 1
            return
        if self.envelope == 0 and n == 0:
            return  # leading delimiter frames
        self.envelope = -1
        self.key.add(m)


@importhook.once
def install(module: Any) -> None:
    """Wrap the send/recv family of `zmq.sugar.socket.Socket` (idempotent)."""
    cls = module.Socket
    cls.send = _wrap_frame(cls.send, sending=True)
    cls.recv = _wrap_frame(cls.recv, sending=False)
    for name in SENDS:
        setattr(cls, name, _wrap_message(getattr(cls, name), sending=True))
    for name in RECVS:
        setattr(cls, name, _wrap_message(getattr(cls, name), sending=False))
    cls.bind = _wrap_endpoint(cls.bind, bound=True)
    cls.connect = _wrap_endpoint(cls.connect, bound=False)
    cls.close = _wrap_close(cls.close)


def _wrap_message(fn: Callable[..., Any], *, sending: bool) -> Callable[..., Any]:
    """A whole message: its frames go through `send`/`recv`, recorded once here."""

    # on an asyncio socket, these take one frame through the shadow's `recv`, then load it
    loads_a_frame = fn.__name__ in ("recv_pyobj", "recv_json", "recv_string")
    serialises = fn.__name__ == "send_pyobj"  # the one frame it sends is the object pickled

    @functools.wraps(fn)
    def flowmap_message(self: Any, *args: Any, **kwargs: Any) -> Any:
        if state.tracer is None or getattr(_tl, "message", None) is not None:
            return fn(self, *args, **kwargs)
        try:
            # frames sent (or received) one by one before it, a ROUTER's `send(identity,
            # SNDMORE)` then `send_pyobj`, begin this message; not those of the other way
            msg = _partial.get(self.underlying) if _partial else None
            if msg is not None and (msg.payload is not None) == sending:  # a list when sent
                del _partial[self.underlying]
            else:
                msg = _Message(_is_router(self))
            msg.payload = args[0] if sending and args else None
            msg.an_object = sending and serialises
            _tl.message = msg
        except Exception as exc:
            record.error(exc)
            return fn(self, *args, **kwargs)
        try:
            out = fn(self, *args, **kwargs)
        finally:
            _tl.message = None
        future = None if sending else getattr(type(self), "_Future", None)  # asyncio sockets'
        if future is not None and issubclass(type(out), future):  # (never the program's class)
            try:
                _await(self, msg, out, loads_a_frame)  # recorded with what it loads
            except Exception as exc:
                record.error(exc)
        elif msg.frames:  # an asyncio socket's deferred send records on its shadow later
            _record(self, msg, sending, out)
        return out

    return flowmap_message


def _wrap_frame(fn: Callable[..., Any], *, sending: bool) -> Callable[..., Any]:
    """`send`/`recv` of one frame: part of the enclosing message, or a message of its own."""

    @functools.wraps(fn)
    def flowmap_frame(self: Any, *args: Any, **kwargs: Any) -> Any:
        if state.tracer is None:
            return fn(self, *args, **kwargs)
        t_ns = record.now_ns()  # a message of one frame began as it was sent, not after
        out = fn(self, *args, **kwargs)
        try:
            msg = getattr(_tl, "message", None)
            frame = (args[0] if args else kwargs.get("data")) if sending else out
            if msg is not None:
                msg.add(frame)
                return out
            addr = self.underlying
            awaited = None if sending or not _awaited else _awaited.get(addr)
            if awaited:  # the shadow of an asyncio socket takes an awaited message's frame
                awaited[0].add(frame)
                if not self.get(RCVMORE):
                    awaited.popleft()
                return out
            # Frame by frame: SNDMORE (sending) or RCVMORE (receiving) says more follow.
            msg = _partial.pop(addr, None)
            if msg is None:
                msg = _Message(_is_router(self), [] if sending else None)
                msg.t_ns = t_ns
            msg.add(frame)
            if sending:
                msg.payload.append(frame)
                flags = args[1] if len(args) > 1 else kwargs.get("flags", 0)
                more = bool(flags & SNDMORE)
            else:
                more = bool(self.get(RCVMORE))
            if more:
                if len(_partial) >= MAX_SOCKETS:
                    _partial.clear()
                _partial[addr] = msg
            else:
                if sending and len(msg.payload) == 1:
                    msg.payload = msg.payload[0]
                _record(self, msg, sending, out)
        except Exception as exc:
            record.error(exc)
        return out

    return flowmap_frame


def _await(sock: Any, msg: _Message, future: Any, loads_a_frame: bool) -> None:
    """An asyncio socket's receipt (`recv_pyobj` returns a future): its frames come now or
    later, through its shadow socket, and the object is loaded after them. Recorded when
    the future is done, with what it loaded, so a relay's receiver knows its tensors; a
    receipt cancelled before its frames came is no message. (A later `recv_multipart`
    records on the shadow itself: the frames are what the program gets.)"""
    addr = sock.underlying
    if not msg.frames and loads_a_frame:
        if len(_awaited) >= MAX_SOCKETS:
            _awaited.clear()
        _awaited.setdefault(addr, collections.deque()).append(msg)

    def done(f: Any) -> None:
        try:
            waiting = _awaited.get(addr)
            if waiting and msg in waiting:
                waiting.remove(msg)  # cancelled, or failed, before a frame came
            if msg.frames:
                ok = not f.cancelled() and f.exception() is None
                _record(sock, msg, False, f.result() if ok else None)
        except Exception as exc:
            record.error(exc)

    future.add_done_callback(done)


def _record(sock: Any, msg: _Message, sending: bool, out: Any) -> None:
    try:
        name, channel = _names(sock)
        key = msg.key.text()
        if sending:
            payload = msg.payload
            d = describe(payload)
            owner = current_owner()
            copied = (relay_bytes.copied(msg.pickled, len(d.storages), d.holders, owner)
                      if d.storages and msg.pickled is not None else "")
            record.send_half(owner, record.UNTRACED, name, d, msg.nbytes, "zmq",
                             channel, key, msg.nbytes, msg.t_ns,
                             items=item_tags.take(payload), payload=payload,
                             relayed="" if d.storages else _relayed(payload, msg.t_ns),
                             copied=copied, frame=msg.largest)
            if _has_arrays(d):  # a view's storage, a small mask's positions
                # `send_pyobj` pickles a view's storage
                found = leaf_notes.collect(payload, "zmq", values.enabled())
                if found:
                    record.notes(owner, record.UNTRACED, name, "zmq",
                                 getattr(state.tracer, "step", None), found)
            if values.enabled():
                record.values(owner, name, "zmq", None, payload)
        else:
            record.receive_half(current_owner(), name, "zmq", channel, key, msg.nbytes,
                                record.now_ns(), out, msg.sample)
    except Exception as exc:
        record.error(exc)


def _relayed(payload: Any, since_ns: int) -> str:
    """The storages raw frames carry on from messages received here before the send began
    at `since_ns` (`relay_bytes`)."""
    frames = payload if type(payload) in (list, tuple) else (payload,)
    return ",".join(ids for ids in (relay_bytes.carried(f, since_ns) for f in frames) if ids)


def _has_arrays(d: Any) -> bool:
    return any(leaf[1] in ("tensor", "ndarray") for leaf in d.leaves)


# -- naming -----------------------------------------------------------------------------
def _wrap_endpoint(fn: Callable[..., Any], *, bound: bool) -> Callable[..., Any]:
    @functools.wraps(fn)
    def flowmap_endpoint(self: Any, addr: Any, *args: Any, **kwargs: Any) -> Any:
        out = fn(self, addr, *args, **kwargs)
        try:
            endpoint = addr.decode() if isinstance(addr, bytes) else str(addr)
            if bound:  # a wildcard or port 0 resolves to the real one
                last = self.get(LAST_ENDPOINT)
                endpoint = last.decode() if isinstance(last, bytes) and last else endpoint
            if len(_endpoints) >= MAX_SOCKETS:
                _endpoints.clear()
            _endpoints.setdefault(self.underlying, []).append(endpoint)
        except Exception as exc:
            record.error(exc)
        return out

    return flowmap_endpoint


def _wrap_close(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def flowmap_close(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            addr = self.underlying
            _endpoints.pop(addr, None)
            _partial.pop(addr, None)
        except Exception:
            pass
        return fn(self, *args, **kwargs)

    return flowmap_close


def _names(sock: Any) -> tuple[str, str]:
    """The hop name (`PUSH tcp://127.0.0.1:5555`) and the channel (`zmq:tcp:5555`)."""
    kind = getattr(sock, "_type_name", "?")
    endpoints = _endpoints.get(sock.underlying) or []
    if not endpoints:
        return f"{kind} ?", "zmq"
    channel = channel_of(endpoints[0]) if len(endpoints) == 1 else "zmq"
    return f"{kind} {stable_endpoint(endpoints[0])}", channel


# Ports from here up are the ones an OS hands out for port 0 and pyzmq's
# `bind_to_random_port` picks from (49152..65536; Linux's ephemeral range starts
# at 32768): they change from run to run, so a seam named with one would be a
# new seam in every run (`diff` and `check` would see every seam gone and new).
EPHEMERAL_PORTS = 32768


def stable_endpoint(endpoint: str) -> str:
    """`tcp://127.0.0.1:44803` -> `tcp://127.0.0.1:*`: a seam name the same in every run."""
    scheme, _, rest = endpoint.partition("://")
    host, sep, port = rest.rpartition(":")
    if scheme == "tcp" and sep and port.isdigit() and int(port) >= EPHEMERAL_PORTS:
        return f"{scheme}://{host}:*"
    return endpoint


def channel_of(endpoint: str) -> str:
    """What both ends of a connection agree on: a TCP port, an IPC path, an inproc name."""
    scheme, _, rest = endpoint.partition("://")
    if scheme == "tcp":
        return f"zmq:tcp:{rest.rsplit(':', 1)[-1]}"
    if scheme == "ipc":
        return f"zmq:ipc:{os.path.abspath(rest) if not rest.startswith('@') else rest}"
    return f"zmq:{scheme}:{rest}"


def _is_router(sock: Any) -> bool:
    try:
        return int(sock.type) == ROUTER
    except Exception:
        return False
