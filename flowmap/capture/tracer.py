"""The per-process tracer: interns strings and payload schemas, streams a shard.

One `Tracer` lives in each traced process. Events are formatted under one lock
(strings and schemas must reach the file before the events that use them) and
appended to an in-memory buffer that is written with one `os.write` when it
grows, when 50 ms have passed, or from a daemon thread every 100 ms — so a
SIGKILL loses at most the last tenth of a second and a hop costs no syscall.

Failure policy: nothing here raises into the user's program. An internal error
is counted (and its first messages kept in the trace); a write that fails (full
disk, vanished directory) turns capture off with one warning on stderr.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from flowmap import trace_format as tf
from flowmap.capture.describe import describe

FLUSH_LINES = 512
FLUSH_INTERVAL_NS = 50_000_000
BACKGROUND_FLUSH_S = 0.1
MAX_ERROR_EVENTS = 20
# Storage ids are kept per shard so cross-hop identity can be analysed; the
# table is cleared when it grows past this, trading a little identity
# resolution for bounded memory in long runs.
MAX_STORAGE_IDS = 100_000

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode


class Tracer:
    def __init__(self, run_dir: str, process: str | None = None) -> None:
        self.run_dir = run_dir
        self.process = process
        self.lock = threading.Lock()
        self.strings: dict[str, int] = {}
        self.schemas: dict[tuple, int] = {}
        self.storage_ids: dict[tuple[int, str], int] = {}
        self.seam_ids: dict[tuple[str, str, str], str] = {}  # -> "src,dst,name" string ids
        self.buf: list[str] = []
        self.events = 0
        self.errors = 0
        self.step: int | None = None
        self.closed = False
        self.fd = -1
        self._open()

    # -- file -----------------------------------------------------------------
    def _open(self) -> None:
        os.makedirs(self.run_dir, exist_ok=True)
        host = socket.gethostname().replace("-", "_") or "host"
        name = f"{host}-{os.getpid()}-{os.urandom(2).hex()}{tf.SHARD_SUFFIX}"
        self.path = os.path.join(self.run_dir, name)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.t0_ns = time.monotonic_ns()
        self.last_flush_ns = self.t0_ns
        header = {
            tf.HEADER: tf.MAGIC,
            "schema": tf.SCHEMA_VERSION,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "host": socket.gethostname(),
            "argv": list(sys.argv),
            "process": self.process,
            "t0_mono_ns": self.t0_ns,
            "t0_wall_ns": time.time_ns(),
        }
        self.buf.append(_dumps(header))
        self._flush_locked()
        self._start_flusher()

    def _start_flusher(self) -> None:
        t = threading.Thread(target=self._flush_loop, name="flowmap-flush", daemon=True)
        t.start()

    def _flush_loop(self) -> None:
        while not self.closed:
            time.sleep(BACKGROUND_FLUSH_S)
            if self.buf:
                with self.lock:
                    self._flush_locked()

    def _flush_locked(self) -> None:
        if not self.buf or self.fd < 0:
            return
        data = ("\n".join(self.buf) + "\n").encode()
        self.buf.clear()
        self.last_flush_ns = time.monotonic_ns()
        try:
            while data:
                written = os.write(self.fd, data)
                data = data[written:]
        except OSError as exc:
            self._disable(f"cannot write the trace ({exc.strerror or exc})")

    def _disable(self, why: str) -> None:
        from flowmap.capture import state

        sys.stderr.write(f"flowmap: {why}; capture is off, the program goes on.\n")
        self.closed = True
        try:
            os.close(self.fd)
        except OSError:
            pass
        self.fd = -1
        if state.tracer is self:
            state.tracer = None

    def flush(self) -> None:
        with self.lock:
            self._flush_locked()

    def close(self) -> None:
        if self.closed:
            return
        with self.lock:
            self.buf.append(
                _dumps([tf.END, self._now_us(), {"events": self.events, "errors": self.errors}])
            )
            self._flush_locked()
            self.closed = True
            if self.fd >= 0:
                try:
                    os.close(self.fd)
                except OSError:
                    pass
                self.fd = -1

    # -- encoding helpers (call with the lock held) ----------------------------
    def _now_us(self) -> int:
        return (time.monotonic_ns() - self.t0_ns) // 1000

    def _sid(self, s: str) -> int:
        i = self.strings.get(s)
        if i is None:
            i = len(self.strings)
            self.strings[s] = i
            self.buf.append(_dumps([tf.STRING, i, s]))
        return i

    def _schema_id(self, leaves: list[tuple]) -> int:
        key = tuple(leaves)
        i = self.schemas.get(key)
        if i is None:
            i = len(self.schemas)
            self.schemas[key] = i
            enc = [
                [self._sid(p), k, list(shape), self._sid(dt), self._sid(dev), nb, cnt,
                 list(dims) if dims else None]
                for (p, k, shape, dt, dev, nb, cnt, dims) in leaves
            ]
            self.buf.append(_dumps([tf.SCHEMA, i, enc]))
        return i

    _next_storage_id = 0

    def _storage_id(self, key: tuple[int, str]) -> int:
        i = self.storage_ids.get(key)
        if i is None:
            if len(self.storage_ids) >= MAX_STORAGE_IDS:
                self.storage_ids.clear()
            # a counter of storages, not of events: distinct storages of one
            # hop get distinct ids, unique within the shard even across clears
            i = self._next_storage_id
            self._next_storage_id = i + 1
            self.storage_ids[key] = i
        return i

    def _emit(self, line: str) -> None:
        self.buf.append(line)
        self.events += 1
        if (
            len(self.buf) >= FLUSH_LINES
            or time.monotonic_ns() - self.last_flush_ns > FLUSH_INTERVAL_NS
        ):
            self._flush_locked()

    # -- events ---------------------------------------------------------------
    def hop(
        self,
        src: str,
        dst: str,
        payload: Any,
        name: str,
        items: Iterable[Any],
        step: int | None,
        version: int | None,
        transport: str,
        dims: Mapping[str, tuple[str, ...]] | None,
    ) -> None:
        t = self._now_us()
        d = describe(payload, dims)
        item_list = _items(items)
        with self.lock:
            if self.closed:
                return
            # Formatted by hand: every field but `items` is an int or null, and
            # this line is written once per hop (json.dumps is ~3x slower here).
            ids = self.storage_ids
            storages = ",".join([
                str(ids[k] if k in ids else self._storage_id(k)) for k in d.storages
            ])
            names = self.seam_ids.get((src, dst, name))
            if names is None:
                names = self.seam_ids[(src, dst, name)] = (
                    f"{self._sid(src)},{self._sid(dst)},{self._sid(name)}"
                )
            step = self.step if step is None else step
            line = (
                f'["h",{t},{names},{self._schema_id(d.leaves)},{d.nbytes},[{storages}],'
                f"{'null' if step is None else int(step)},"
                f"{'null' if version is None else int(version)},{self._sid(transport)},"
                f"{_items_json(item_list)}]"
            )
            self._emit(line)

    def counter(self, owner: str, name: str, value: float) -> None:
        t = self._now_us()
        with self.lock:
            if not self.closed:
                self._emit(_dumps([tf.COUNTER, t, self._sid(name), value, self._sid(owner)]))

    def mark(self, owner: str, name: str) -> None:
        t = self._now_us()
        with self.lock:
            if not self.closed:
                self._emit(_dumps([tf.MARK, t, self._sid(name), self._sid(owner)]))

    def drop(self, owner: str, items: Iterable[Any], reason: str) -> None:
        t = self._now_us()
        item_list = _items(items)
        with self.lock:
            if not self.closed:
                self._emit(_dumps([tf.DROP, t, self._sid(owner), self._sid(reason), item_list]))

    def set_step(self, step: int) -> None:
        t = self._now_us()
        with self.lock:
            self.step = step
            if not self.closed:
                self._emit(_dumps([tf.STEP, t, step]))

    def error(self, exc: BaseException) -> None:
        """Count an internal failure; keep the first few messages in the trace."""
        try:
            with self.lock:
                self.errors += 1
                if self.errors <= MAX_ERROR_EVENTS and not self.closed:
                    msg = f"{type(exc).__name__}: {exc}"[:500]
                    self.buf.append(_dumps([tf.ERROR, self._now_us(), msg]))
        except Exception:
            pass


def _items_json(items: list[Any] | None) -> str:
    if items is None:
        return "null"
    try:
        return "[" + ",".join(map(_int_str, items)) + "]"
    except TypeError:
        return _dumps(items)


def _int_str(x: Any) -> str:
    if type(x) is not int:
        raise TypeError
    return str(x)


def _items(items: Iterable[Any]) -> list[Any] | None:
    if items is None:
        return None
    if isinstance(items, (str, int)):
        return [items]
    out = [x if type(x) is str or type(x) is int else str(x) for x in items]
    return out or None
