"""Hops through multiprocessing (and torch.multiprocessing) queues and pipes.

`Queue`, `JoinableQueue`, `SimpleQueue` and `Connection` (`Pipe()`, and the
connections of `multiprocessing.connection.Client`/`Listener`) already pickle
every message with `ForkingPickler.dumps` and unpickle it with `loads`. In
`multiprocessing.queues` and `multiprocessing.connection` that name is
replaced by a subclass (`_observing`) that calls the real one and, inside a
put/get/send/recv that flowmap watches, keeps the message and its pickled
bytes for the wrapper to record afterwards; so nothing is pickled twice and
the message itself is never touched: a consumer that is not traced gets
exactly what was put.

The sender writes a send half (owner, payload description, pickled size, key
= digest of the pickled bytes), the receiver a receive half (its owner, the
same key); both name the channel by the pipe's inode, the same in every
process that holds the pipe (sockets of a duplex `Pipe` have no common name:
their key alone matches them). A `Queue`'s bytes are pickled and sent by its
feeder thread: `put` notes its owner and time, the feeder records.

Transport: `shm` when the payload holds tensors and torch's reducers are
registered (torch.multiprocessing moves their storages through shared
memory; then `nbytes` is the tensors' bytes and `wire_bytes` the pickled
handles), else `pickle` (`nbytes` = the pickled size).
"""

from __future__ import annotations

import functools
import os
import stat
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowmap.capture import item_tags, sigterm, state, values
from flowmap.capture.api import current_owner
from flowmap.integrations.transports import mp_pool, record, relay_bytes
from flowmap.integrations.transports.record import describe

if TYPE_CHECKING:
    from flowmap.capture.describe import Description

# multiprocessing's own bookkeeping messages (file-descriptor hand-over of
# shared tensors) are not the program's data.
_INTERNAL_CALLERS = ("multiprocessing.resource_sharer",)
MAX_PENDING_PUTS = 10_000

_tl = threading.local()
# id(obj) -> [(t_ns, owner, step, leaf notes)] of puts not yet fed: a message belongs to the
# step it was put in, whenever the feeder thread gets to it; its leaf notes are taken at the
# put too, while its storages are as the program left them (owner None: not recorded).
_pending: dict[int, list[tuple[int, str | None, int | None, list[Any], Any]]] = {}
_installed: set[str] = set()
_real_pickler: Any = None


class _Seen:
    """What the observing pickler saw inside one watched call."""

    __slots__ = ("obj", "buf", "key", "wire", "sample")

    def __init__(self) -> None:
        self.obj: Any = None
        self.buf: Any = None
        self.key: str | None = None
        self.wire = 0
        self.sample: relay_bytes.Samples | None = None  # of the bytes received (`relay_bytes`)


def install_queues(module: Any) -> None:
    """Patch `multiprocessing.queues` (idempotent)."""
    if "queues" in _installed:
        return
    _installed.add("queues")
    module._ForkingPickler = _observing(module._ForkingPickler)
    module.Queue.put = _wrap_put(module.Queue.put)
    module.JoinableQueue.put = _wrap_put(module.JoinableQueue.put)
    module.Queue._feed = staticmethod(_wrap_feed(module.Queue._feed))
    module.Queue.get = _wrap_get(module.Queue.get, lambda q: q._reader)
    module.SimpleQueue.put = _wrap_send(module.SimpleQueue.put, lambda q: q._writer)
    module.SimpleQueue.get = _wrap_get(module.SimpleQueue.get, lambda q: q._reader)


def install_connection(module: Any) -> None:
    """Patch `multiprocessing.connection` (idempotent)."""
    if "connection" in _installed:
        return
    _installed.add("connection")
    module._ForkingPickler = _observing(module._ForkingPickler)
    base = module._ConnectionBase
    base.send = _wrap_send(base.send, lambda c: c)
    base.recv = _wrap_get(base.recv, lambda c: c)
    base.send_bytes = _wrap_send_bytes(base.send_bytes)
    base.recv_bytes = _wrap_recv_bytes(base.recv_bytes)


def _observing(real: Any) -> Any:
    """A subclass of ForkingPickler whose dumps/loads also tell the watching wrapper."""
    global _real_pickler
    if _real_pickler is None:
        _real_pickler = real
    return type("ObservingPickler", (real,), {"dumps": staticmethod(_dumps),
                                              "loads": staticmethod(_loads),
                                              "__module__": __name__})


def _dumps(obj: Any, protocol: int | None = None) -> Any:
    buf = _real_pickler.dumps(obj, protocol)
    seen = getattr(_tl, "seen", None)
    if seen is not None:
        seen.obj, seen.buf = obj, buf
    return buf


def _loads(data: Any, *args: Any, **kwargs: Any) -> Any:
    seen = getattr(_tl, "seen", None)
    if seen is not None:
        try:
            seen.key, seen.wire = record.key_of(data)
            seen.sample = relay_bytes.sample_of(data)
        except Exception as exc:
            record.error(exc)
    return _real_pickler.loads(data, *args, **kwargs)


# -- send side ------------------------------------------------------------------
def _wrap_put(put: Callable[..., Any]) -> Callable[..., Any]:
    """Queue.put: note who put what when; the feeder thread records it once pickled."""

    @functools.wraps(put)
    def flowmap_put(self: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if state.tracer is None:
            return put(self, obj, *args, **kwargs)
        # described now, before pickling: torch moves a tensor's storage into shared memory
        # as it pickles it, and the moved storage is at another address
        owner, step = mp_pool.sender(obj, current_owner, _step)  # an executor's task, or not
        entry = (record.now_ns(), owner, step, _notes_now(obj), _described(obj))
        if len(_pending) >= MAX_PENDING_PUTS:
            _pending.clear()
        _pending.setdefault(id(obj), []).append(entry)
        try:
            return put(self, obj, *args, **kwargs)
        except BaseException:
            _forget(id(obj), entry)
            raise

    return flowmap_put


def _forget(key: int, entry: tuple[int, str | None, int | None, list[Any], Any]) -> None:
    entries = _pending.get(key)
    if entries and entry in entries:
        entries.remove(entry)
        if not entries:
            _pending.pop(key, None)


def _wrap_feed(feed: Callable[..., Any]) -> Callable[..., Any]:
    """Queue._feed (the feeder thread's body): watch its pickling, record each send."""

    @functools.wraps(feed)
    def flowmap_feed(*args: Any) -> Any:
        try:
            send_bytes = args[2]
            writer = getattr(send_bytes, "__self__", None)
            if writer is not None and hasattr(writer, "fileno"):
                args = (*args[:2], _fed(send_bytes, writer), *args[3:])
                _tl.seen = _Seen()
        except Exception as exc:
            record.error(exc)
        return feed(*args)

    return flowmap_feed


def _fed(send_bytes: Callable[[Any], Any], writer: Any) -> Callable[[Any], Any]:
    channel = _channel(writer)

    def flowmap_send_bytes(buf: Any) -> Any:
        seen = _tl.seen
        sigterm.hold()
        try:
            try:
                out = send_bytes(buf)
            except BaseException:
                seen.obj = seen.buf = None
                raise
            obj, pickled = seen.obj, seen.buf
            seen.obj = seen.buf = None
            if state.tracer is not None and pickled is buf:
                entries = _pending.get(id(obj))
                if entries:
                    t_ns, owner, step, notes, d = entries.pop(0)
                    if not entries:
                        _pending.pop(id(obj), None)
                else:
                    t_ns, owner, step, notes, d = (record.now_ns(), state.default_owner, _step(),
                                                   [], None)
                if owner is not None:  # None: a pool's shutdown sentinel (`flowmap_put`)
                    _record_send(owner, obj, buf, channel, t_ns, step, notes, d)
        finally:
            sigterm.release()
        return out

    return flowmap_send_bytes


def _wrap_send(send: Callable[..., Any], conn_of: Callable[[Any], Any]) -> Callable[..., Any]:
    """Connection.send and SimpleQueue.put: pickle, send, then record."""

    @functools.wraps(send)
    def flowmap_send(self: Any, obj: Any) -> Any:
        if state.tracer is None or _internal():
            return send(self, obj)
        t_ns = record.now_ns()
        notes, d = _notes_now(obj), _described(obj)  # before torch moves storages (`_wrap_put`)
        outer = getattr(_tl, "seen", None)
        seen = _tl.seen = _Seen()
        sigterm.hold()  # a Pool's terminate comes as soon as its last result is in
        try:
            try:
                out = send(self, obj)
            finally:
                _tl.seen = outer
            owner, step = mp_pool.sender(obj, current_owner, _step)
            if seen.buf is not None and owner is not None:
                _record_send(owner, obj, seen.buf, _channel(conn_of(self)), t_ns, step, notes, d)
        finally:
            sigterm.release()
        return out

    return flowmap_send


def _notes_now(obj: Any) -> list[Any]:
    """The leaf notes of `obj` before it is pickled (`flowmap.capture.leaf_notes`); never raises."""
    if "torch" not in sys.modules and "numpy" not in sys.modules:
        return []
    try:
        from flowmap.capture import leaf_notes, values

        return leaf_notes.collect(obj, "shm" if _torch_shares_tensors() else "pickle",
                                  values.enabled())
    except Exception as exc:
        record.error(exc)
        return []


def _described(obj: Any) -> Description | None:
    """`obj` described (metadata only); None if that failed (it is tried again, later)."""
    try:
        return describe(obj)
    except Exception as exc:
        record.error(exc)
        return None


def _record_send(owner: str, obj: Any, buf: Any, channel: str, t_ns: int,
                 step: int | None, notes: list[Any], d: Description | None = None) -> None:
    try:
        key, wire = record.key_of(buf)
        if d is None:
            d = describe(obj)
        shm = _has_tensors(d) and _torch_shares_tensors()
        transport = "shm" if shm else "pickle"
        record.send_half(owner, record.UNTRACED, type(obj).__name__, d,
                         d.nbytes if shm else wire, transport, channel, key,
                         wire, t_ns, step, item_tags.take(obj), obj, frame=buf)
        if notes:
            record.notes(owner, record.UNTRACED, type(obj).__name__, transport, step, notes)
        if values.enabled():
            record.values(owner, type(obj).__name__, transport, step, obj)
    except Exception as exc:
        record.error(exc)


# -- receive side -------------------------------------------------------------------
def _wrap_get(get: Callable[..., Any], conn_of: Callable[[Any], Any]) -> Callable[..., Any]:
    """Queue.get, SimpleQueue.get, Connection.recv: receive, unpickle, then record."""

    @functools.wraps(get)
    def flowmap_get(self: Any, *args: Any, **kwargs: Any) -> Any:
        if state.tracer is None or _internal():
            return get(self, *args, **kwargs)
        outer = getattr(_tl, "seen", None)
        seen = _tl.seen = _Seen()
        try:
            out = get(self, *args, **kwargs)
        finally:
            _tl.seen = outer
        if seen.key is not None:
            try:
                by = mp_pool.submitter(out)
                record.receive_half(by[0] if by else current_owner(), type(out).__name__, "pickle",
                                    _channel(conn_of(self)), seen.key, seen.wire,
                                    record.now_ns(), out, seen.sample)
            except Exception as exc:
                record.error(exc)
        return out

    return flowmap_get


# -- raw bytes: a program's own serialisation -------------------------------------------
def _wrap_send_bytes(send_bytes: Callable[..., Any]) -> Callable[..., Any]:
    """Connection.send_bytes called by the program (bytes it serialised itself: a pickle,
    msgpack): a send half of those bytes, carrying on the storages of a message this
    process received whose bytes they contain (`relay_bytes`). Queues and `send` reach
    the pipe through it or beside it already recorded, and the standard library's own
    (an authentication handshake, a pool's wake-up) is not the program's data."""

    @functools.wraps(send_bytes)
    def flowmap_send_bytes(self: Any, buf: Any, offset: int = 0, size: int | None = None) -> Any:
        if state.tracer is None or getattr(_tl, "seen", None) is not None or _from_library():
            return send_bytes(self, buf, offset, size)
        t_ns = record.now_ns()
        sigterm.hold()
        try:
            out = send_bytes(self, buf, offset, size)
            try:
                m = memoryview(buf).cast("B")
                message = m[offset:] if size is None else m[offset : offset + size]
                key, n = record.key_of(message)
                record.send_half(current_owner(), record.UNTRACED, type(buf).__name__,
                                 record.describe(buf), n, "pickle", _channel(self), key, n, t_ns,
                                 _step(), relayed=relay_bytes.carried(buf, t_ns), frame=message)
            except Exception as exc:
                record.error(exc)
        finally:
            sigterm.release()
        return out

    return flowmap_send_bytes


def _wrap_recv_bytes(recv_bytes: Callable[..., Any]) -> Callable[..., Any]:
    """Connection.recv_bytes called by the program: the receive half of raw bytes."""

    @functools.wraps(recv_bytes)
    def flowmap_recv_bytes(self: Any, *args: Any, **kwargs: Any) -> Any:
        if state.tracer is None or getattr(_tl, "seen", None) is not None or _from_library():
            return recv_bytes(self, *args, **kwargs)
        out = recv_bytes(self, *args, **kwargs)
        try:
            key, n = record.key_of(out)
            record.receive_half(current_owner(), type(out).__name__, "pickle", _channel(self),
                                key, n, record.now_ns(), out, relay_bytes.sample_of(out))
        except Exception as exc:
            record.error(exc)
        return out

    return flowmap_recv_bytes


# -- helpers ---------------------------------------------------------------------------
def _step() -> int | None:
    """The step of this process's tracer now (a put's, before its feeder thread runs)."""
    try:
        step = getattr(state.tracer, "step", None)
        return step if type(step) is int else None
    except Exception:  # never into the user's put
        return None


def _channel(conn: Any) -> str:
    """A name for the pipe under `conn` that every process holding it agrees on."""
    try:
        st = os.fstat(conn.fileno())
    except (OSError, ValueError, AttributeError):
        return "mp"
    if stat.S_ISFIFO(st.st_mode):
        return f"mp:pipe:{st.st_dev}:{st.st_ino}"
    return "mp:sock"


def _internal() -> bool:
    caller = sys._getframe(2).f_globals.get("__name__", "")
    return caller in _INTERNAL_CALLERS


# Modules whose raw sends are their own plumbing, not a program's messages: a Listener's
# authentication, a process pool's wake-up pipe, torch's handing over of file descriptors.
_LIBRARY_CALLERS = ("multiprocessing", "concurrent.futures", "torch.multiprocessing")


def _from_library() -> bool:
    caller: str = sys._getframe(2).f_globals.get("__name__", "")
    return caller.startswith(_LIBRARY_CALLERS)


def _has_tensors(d: Description) -> bool:
    return any(leaf[1] == "tensor" for leaf in d.leaves)


def _torch_shares_tensors() -> bool:
    torch = sys.modules.get("torch")
    reducers = getattr(_real_pickler, "_extra_reducers", None)
    return torch is not None and reducers is not None and \
        getattr(torch, "Tensor", None) in reducers
