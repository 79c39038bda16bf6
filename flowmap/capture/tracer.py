"""The per-process tracer: takes the API's events, writes them to a shard through the writer.

One `Tracer` lives in each traced process. Every event is formatted by the shard's
`TraceWriter` under its lock (strings and schemas must reach the file before the events that
use them) and copied straight into the shard's file mapping (`ShardFile`): it is on disk once
the call that recorded it returns, so a SIGKILL at any moment, even inside a long C call,
loses nothing recorded. There is no buffer and no flusher thread; `--aggregate` folds events
instead of writing them: each write call offers its event to the sink chosen as tracing
starts (`flowmap.capture.sink`).

Failure policy: nothing here raises into the user's program. An internal error is counted (and
its first messages kept in the trace). A full disk stops capture with one warning; the shard
keeps every event written before it plus a closing note. A shard deleted under us is noticed
within `CHECK_EVERY` events, rewritten from the mapping with one warning, and capture goes on.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from time import monotonic_ns
from typing import Any

from flowmap import rundir
from flowmap import trace_format as tf
from flowmap.capture import describe_lazy, identity, owner_context, step_hooks, text_identity
from flowmap.capture.names import NOT_READ, items_list, items_text, name_text
from flowmap.capture.shard_file import ShardFile, ShardFull
from flowmap.capture.sink import STREAM, Sink
from flowmap.writer.encoder import TraceWriter, dumps, encode_line

MAX_ERROR_EVENTS = 20
CHECK_EVERY = 4096  # events between two checks that the shard file still exists
# How long `close` waits for an event under way: events take microseconds, so a lock held
# longer is held by the frame a signal interrupted (see `close`).
CLOSE_WAIT_S = 0.5
_INF, _NEG_INF = float("inf"), float("-inf")


class Tracer:
    """The shard of this process: its file, the writer that encodes its lines, its counts."""

    def __init__(self, run_dir: str, process: str | None = None) -> None:
        self.run_dir = run_dir
        self.process = process
        self.writer = TraceWriter(self._write, self._emit)
        self.lock = self.writer.lock  # every event is formatted and written under it
        self.events = 0
        self.errors = 0
        self.warned: set[str] = set()
        self.step: int | None = None
        # True once the program set a step itself (flowmap.step, a seam map's `step:`):
        # from then on, steps inferred from its optimizer are ignored.
        self.explicit_steps = False
        self.closed = False
        self.sink: Sink = STREAM  # `fold.ProcessFolder` under `flowmap trace --aggregate`
        self.texts = text_identity.new_keys()  # ids of the strings hops of text carried
        # Called once when capture stops for good (a full disk): the session forgets us.
        self.on_stop: Callable[[Tracer], None] | None = None
        self.file: ShardFile | None = None
        self._open()

    # -- file -----------------------------------------------------------------
    def _open(self) -> None:
        os.makedirs(self.run_dir, exist_ok=True)
        # os.uname() is what socket.gethostname() reads on POSIX, without importing
        # socket (~5 ms of every traced child's start-up)
        hostname = os.uname().nodename if hasattr(os, "uname") else os.environ.get("COMPUTERNAME", "")
        host = hostname.replace("-", "_") or "host"
        name = rundir.shard_file_name(host, os.getpid(), os.urandom(2).hex())
        self.path = os.path.join(self.run_dir, name)
        self.file = ShardFile(self.path)
        self.t0_ns = time.monotonic_ns()
        self.writer.header({
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "host": hostname,
            "argv": list(sys.argv),
            "process": self.process,
            "t0_mono_ns": self.t0_ns,
            "t0_wall_ns": time.time_ns(),
            **identity.process_identity(),
        })

    @property
    def fd(self) -> int:
        return self.file.fd if self.file is not None else -1

    def _write(self, line: str) -> None:
        """Write one line (lock held); a full disk stops capture here."""
        f = self.file
        if f is None:
            return
        try:
            f.write(encode_line(line))
        except ShardFull as exc:
            self._stop(f"the disk is full ({exc.strerror or exc})", f"capture stopped: {exc.strerror}")
        except (OSError, ValueError) as exc:
            self._stop(f"cannot write the trace ({exc})", f"capture stopped: {exc}")

    def _emit(self, line: str) -> None:
        """Write one event line (lock held). The hot path of `_write` and `ShardFile.write`,
        inlined: one copy into the map."""
        f = self.file
        if f is not None:
            try:
                data = (line + "\n").encode()
            except UnicodeEncodeError:
                data = encode_line(line)
            pos = f.pos
            end = pos + len(data)
            m = f.map
            if m is not None and end <= f.limit:
                m[pos:end] = data
                f.pos = end
            else:
                self._write(line)
        self.events += 1
        if not self.events % CHECK_EVERY:
            self._check_file()

    def _check_file(self) -> None:
        """Rewrite the shard if it was deleted; stop (one warning) if that fails."""
        f = self.file
        if f is None or not f.deleted():
            return
        data = f.contents()
        try:
            os.makedirs(self.run_dir, exist_ok=True)
            fresh = ShardFile(self.path)
            fresh.write(data)
        except OSError as exc:
            self._stop(f"the run directory {self.run_dir} vanished and cannot be made again "
                       f"({exc.strerror or exc})", None)
            return
        f.abandon()
        self.file = fresh
        self._warn(f"the shard {self.path} was deleted while tracing; it was written again "
                   f"({len(data)} bytes) and capture goes on")

    def _stop(self, why: str, note: str | None) -> None:
        """Turn capture off for good (lock held): close the shard with `note`, warn once."""
        f = self.file
        if f is not None:
            if note is not None:
                f.write_reserved(encode_line(self.writer.error_line(self.now_us(), note)))
                f.write_reserved(encode_line(self._end_line()))
            f.close()
        self.file = None
        self.closed = True
        if self.on_stop is not None:
            self.on_stop(self)
        self._warn(f"{why}; capture is off, the program goes on (the run keeps what was written)")

    def _warn(self, message: str) -> None:
        if message in self.warned:
            return
        self.warned.add(message)
        try:
            sys.stderr.write(f"flowmap: {message}.\n")
        except Exception:
            pass

    def warn_once(self, key: str, message: str) -> None:
        """A warning on stderr the first time `key` comes up in this process."""
        if key not in self.warned:
            self.warned.add(key)
            self._warn(message)

    def flush(self) -> None:
        """Nothing to flush: every event is in the file when it is recorded."""

    def _end_line(self) -> str:
        return self.writer.end_line(self.now_us(), self.events, self.errors)

    def close(self) -> None:
        """Write the end of the shard. Called from a SIGTERM handler too, which may run in the
        middle of an event of this very thread, the lock held: waiting for it would hang the
        program instead of ending it. So the wait is bounded; past it the interrupted event
        never resumes (the handler goes on to kill the process), and the end is written over
        what that event had begun."""
        if self.closed:
            return
        held = self.lock.acquire(timeout=CLOSE_WAIT_S)
        try:
            if self.closed:
                return
            self._check_file()
            self.sink.write()  # what was folded of the step under way
            self._write(self._end_line())
            self.closed = True
            if self.file is not None:
                self.file.close()
                self.file = None
        finally:
            if held:
                self.lock.release()

    def abandon(self) -> None:
        """In a forked child: let go of the parent's shard without writing to it."""
        self.closed = True
        if self.file is not None:
            self.file.abandon()
            self.file = None

    def now_us(self) -> int:
        """Microseconds since this shard's `t0_mono_ns`: the time of an event recorded now."""
        return (time.monotonic_ns() - self.t0_ns) // 1000

    def _names(self, *names: Any) -> list[str] | None:
        """Owners and names as strings; None (one warning) if one cannot be taken."""
        out = []
        for n in names:
            s = name_text(n)
            if s is None:
                kind = type(n).__name__
                self.warn_once(
                    f"name:{kind}",
                    f"an owner or name of type {kind} was given (strings and numbers are "
                    "taken); events named so are not recorded",
                )
                self.errors += 1
                return None
            out.append(s)
        return out

    def read_items(self, items: Any) -> list[Any] | None:
        """The ids of `items` as a trace holds them; None for none, or (one warning) for a
        type that is not read."""
        got = items_list(items)
        if got is NOT_READ:
            kind = type(items).__name__
            self.warn_once(f"items:{kind}", f"items of type {kind} are not read (only a list, "
                           "tuple, set or range is, so an iterator is never used up)")
            return None
        return got  # type: ignore[no-any-return]

    # -- events ---------------------------------------------------------------
    def hop(
        self,
        src: Any,
        dst: Any,
        payload: Any,
        name: Any,
        items: Any,
        step: int | None,
        version: int | None,
        transport: Any,
        dims: Mapping[str, tuple[str, ...]] | None,
    ) -> None:
        t = (monotonic_ns() - self.t0_ns) // 1000
        if type(src) is not str or type(dst) is not str or type(name) is not str \
                or type(transport) is not str:
            names = self._names(src, dst, name, transport)
            if names is None:
                return
            src, dst, name, transport = names
        d = describe_lazy.describe(payload, dims)  # the describers load at the first hop
        if self.sink.hop(src, dst, name, d, items, step, version, transport, t):
            return
        ids = "null" if type(items) is tuple and not items else items_text(items)
        if ids is None:  # a type not read: one warning, the hop is kept without items
            self.read_items(items)
            ids = "null"
        with self.lock:
            if self.closed:
                return
            w = self.writer
            storages = w.storage_ids(d.storages, d.holders, src, dst) if d.storages else ""
            w.acted(owner_context.current_owner.get())
            if w.hop(t, src, dst, name, d.leaves, d.nbytes, storages,
                     self.step if step is None else step, version, transport, ids):
                self.name_objects(t, src, dst, name, payload)  # strings or floats, tensors or not

    def name_objects(self, t_us: int, src: str, dst: str, name: str, payload: Any) -> None:
        """The `t` line of the hop (or send half) just written with strings or floats, lock
        held: text has no storage, its strings and floats are its identity (`text_identity`)."""
        objects = text_identity.strings_of(payload)
        if objects:
            self.writer.text_keys(t_us, src, dst, name, self.texts.keys(objects))

    def notes(self, src: str, dst: str, name: str, transport: str, step: int | None,
              notes: list[list[Any]]) -> None:
        """What the schema of the hop just recorded cannot say (`flowmap.capture.leaf_notes`).

        Under `--aggregate` only inside the detail window: notes come per hop, and a folded
        trace must grow with seams and steps, not hops."""
        if self.sink.past_detail():
            return
        t = self.now_us()
        with self.lock:
            if not self.closed:
                self.writer.leaf_notes(t, src, dst, name, transport,
                                       self.step if step is None else step, notes)

    def values(self, src: str, dst: str, name: str, transport: str, step: int | None,
               payload: Any) -> None:
        """Value figures of a sampled hop that moved bytes (`flowmap trace --values` only).

        Under `--aggregate` only inside the detail window, like leaf notes."""
        from flowmap.capture import values

        if self.sink.past_detail() or not values.due(src, dst, name):
            return
        found = values.sample(payload)
        if not found:
            return
        t = self.now_us()
        with self.lock:
            if not self.closed:
                self.writer.value_figures(t, src, dst, name, transport,
                                          self.step if step is None else step, found)

    def counter(self, owner: Any, name: Any, value: float) -> None:
        t = (monotonic_ns() - self.t0_ns) // 1000
        if type(owner) is not str or type(name) is not str:
            names = self._names(owner, name)
            if names is None:
                return
            owner, name = names
        if value != value or value in (_INF, _NEG_INF):
            self.warn_once("counter:nan", f"counter {name} got {value}; such samples "
                           "are not recorded (trace files hold finite numbers only)")
            return
        if self.sink.counter(owner, name, value, t):
            return
        with self.lock:
            if not self.closed:
                self.writer.counter(t, name, value, owner)

    def mark(self, owner: Any, name: Any) -> None:
        t = self.now_us()
        names = self._names(owner, name)
        if names is None:
            return
        if self.sink.mark(names[0], names[1], t):
            return
        with self.lock:
            if not self.closed:
                self.writer.mark(t, names[1], names[0])

    def info(self, key: str, value: str) -> None:
        """Something this process learnt of itself (`trace_format`: an `i` event)."""
        with self.lock:
            if not self.closed:
                self.writer.emit(dumps([tf.PROCESS_INFO, self.now_us(), key, value]))

    def drop(self, owner: Any, items: Any, reason: Any) -> None:
        t = self.now_us()
        names = self._names(owner, reason)
        if names is None:
            return
        item_list = self.read_items(items)
        if self.sink.drop(names[0], names[1], len(item_list or ()), t):
            return
        with self.lock:
            if not self.closed:
                self.writer.drop(t, names[0], names[1], item_list)

    def set_step(self, step: int, inferred: bool = False) -> None:
        """`inferred`: a step flowmap counted (optimizer updates), which the program's own
        steps override."""
        t = self.now_us()
        for hook in step_hooks.hooks:
            try:
                hook(step)
            except Exception as exc:
                self.error(exc)
        with self.lock:
            if inferred and self.explicit_steps:
                return
            if not inferred:
                self.explicit_steps = True
            self.sink.step_moved(step)
            self.step = step
            if not self.closed:
                self.writer.step(t, step)

    def error(self, exc: BaseException) -> None:
        """Count an internal failure; keep the first few messages in the trace."""
        try:
            with self.lock:
                self.errors += 1
                if self.errors <= MAX_ERROR_EVENTS and not self.closed:
                    self.writer.error(self.now_us(), f"{type(exc).__name__}: {exc}"[:500])
        except Exception:
            pass

