"""Collectives that no Python call showed, read from PyTorch's Flight Recorder.

DDP's gradient all-reduce runs in its C++ Reducer, and so does its start-up
bucket bookkeeping: the Python wrapper (`dist.py`) never sees them. PyTorch's
Flight Recorder does: a ring per process (`TORCH_FR_BUFFER_SIZE` entries,
2,000 by default) that records every collective with its op, the sizes and
dtypes of its inputs, its process group, the thread that issued it and when,
whoever issued it. This module reads that ring and writes each entry the
wrapper did not already record as the hop the wrapper would have written:
`<rank owner> -> group[<ranks>] : <op>` with the bytes of the inputs (what
this rank sends), transport `collective`, on the step in which it was issued.

- Two recorders: `_dump_fr_trace_json` (the generic one, gloo) and
  `_dump_nccl_trace_json` (ProcessGroupNCCL's own, absent from CPU builds).
  Both are read; an entry both hold (same group and sequence number) counts
  once.
- Not counted twice: the wrapper notes each call it records (thread, start,
  end, wall clock); an entry issued by that thread inside that window is its.
- Lost entries: record ids are consecutive, so a gap between two reads is what
  the ring overwrote before it was read. Each gap is counted as a tracer
  error (`run.health`) with how many entries it lost.
- When: a dump costs time in proportion to the ring's contents, so it is not
  read at every step. A daemon thread looks at the process groups' sequence
  numbers (a counter read, well under a microsecond) once a second, and reads
  when half the ring is new, or when new entries have waited `STALE_S` and 100
  times what the last read took (so reading costs under 1% of the time); the
  ring is also read before `destroy_process_group` and at exit. Entries are placed on
  steps by their creation time against the times the process's step changed.
- Not known to the recorder: a broadcast's or scatter's root. The group's first
  rank is taken as the root (DDP, FSDP and `_broadcast_coalesced` callers
  broadcast from it); the wrapper, which sees `src`, records the calls made from
  Python exactly. Point-to-point entries (no peer recorded) are left out.

`FLOWMAP_FLIGHT_RECORDER=0` turns reading off (the wrapper still records).
"""

from __future__ import annotations

import atexit
import bisect
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from flowmap import environment
from flowmap.capture import state
from flowmap.integrations.transports import record
from flowmap.integrations.transports.flight_entries import describe_entry, ranks_text

ENV = environment.FLIGHT_RECORDER
POLL_S = 1.0
STALE_S = 10.0  # new entries wait at most this long (a SIGKILLed worker loses only those)
READ_SHARE = 100  # a read waits at least this many times the last read's duration
FINAL_WAIT_S = 5.0  # the read at exit waits this long at most for a poll under way
MAX_WINDOWS = 200_000  # wrapper calls remembered between two reads
OPEN = 1 << 62  # the end of a span whose call is still running
DEFAULT_RING = 2000



_DEVICES = {"gloo": "cpu", "nccl": "cuda", "xccl": "xpu"}  # a backend's tensors


def enabled() -> bool:
    return (environment.get(ENV) or "1").strip().lower() not in ("0", "off", "false", "no")


def ring_size() -> int:
    text = os.environ.get("TORCH_FR_BUFFER_SIZE", "")
    return int(text) if text.isdigit() else DEFAULT_RING


class Reader:
    """The Flight Recorder of this process, read into hops."""

    def __init__(self, c10d: Any, owner: Callable[[], str], dumps: list[tuple[str, Any]]) -> None:
        self.c10d = c10d
        self.owner = owner  # this process's rank owner
        self.dumps = dumps  # (device, dump function) per recorder
        self.lock = threading.Lock()
        # A child forked from this process (a DataLoader worker) inherits this reader and a copy
        # of the ring, but the entries are its parent's to write: only this process reads.
        self.pid = os.getpid()
        t0 = getattr(state.tracer, "t0_ns", None)  # entries from before tracing began: not ours
        self.start_wall_ns = time.time_ns() - (time.monotonic_ns() - t0 if t0 else 0)
        self.last_id: dict[str, int] = {}  # recorder -> last record id read
        self.last_seq: dict[str, int] = {}  # group name -> last collective sequence id written
        self.windows: list[list[int]] = []  # [thread, wall start, wall end (OPEN: running)]
        self._sorted: tuple[int, dict[int, list[tuple[int, int]]]] | None = None  # per read
        t = state.tracer
        self.steps: list[tuple[int, int | None]] = [(0, getattr(t, "step", None))]
        self.labels: dict[str, str] = {}  # group name -> "group[0,1]"
        self.issued = 0  # the groups' sequence numbers, summed, at the last read
        self.last_read_s = time.monotonic()
        self.read_s = 0.0  # how long the last read took
        self.lost = 0
        self.stopped = False

    # -- what the rest of flowmap tells the reader ------------------------------------
    def opened(self) -> list[int]:
        """The wrapper begins recording a call of this thread: entries issued from now until
        it sets the span's end (`span[2]`) are its. Open, the span covers every entry
        after its start, so a read during the call does not take its entry as unseen."""
        w = self.windows
        if len(w) >= MAX_WINDOWS:
            del w[: MAX_WINDOWS // 2]
        span = [threading.get_ident(), time.time_ns(), OPEN]
        w.append(span)
        return span

    def step_moved(self, step: int) -> None:
        self.steps.append((time.time_ns(), step))

    def remember_groups(self) -> None:
        """Label every group c10d knows now (before `destroy_process_group` forgets them)."""
        world = getattr(self.c10d, "_world", None)
        names = getattr(world, "pg_names", None) or {}
        for pg, name in list(names.items()):
            if name not in self.labels:
                try:
                    self.labels[name] = "group[" + ranks_text(
                        self.c10d.get_process_group_ranks(pg)) + "]"
                except Exception:
                    pass

    # -- reading --------------------------------------------------------------
    def due(self) -> bool:
        """Whether the ring should be read now: half of it is new, or new entries waited."""
        issued = self._issued()
        new = issued - self.issued if issued is not None else 1
        waited = time.monotonic() - self.last_read_s
        # a dump costs in proportion to the ring: waiting 100 reads' time keeps it under 1%
        patience = max(STALE_S, READ_SHARE * self.read_s)
        return new >= ring_size() // 2 or (new > 0 and waited >= patience)

    def _issued(self) -> int | None:
        world = getattr(self.c10d, "_world", None)
        names = getattr(world, "pg_names", None) or {}
        total = 0
        try:
            for pg in list(names):
                total += int(pg._get_sequence_number_for_group())
        except Exception:
            return None
        return total

    def read(self) -> None:
        """Write the entries recorded since the last read (never raises)."""
        if os.getpid() != self.pid or not self.lock.acquire(blocking=False):
            return  # another thread reads right now
        try:
            if not self.stopped:
                self._read()
        finally:
            self.lock.release()

    def _read(self) -> None:
        """`read`, the lock held."""
        try:
            t0 = time.monotonic()
            self._sorted = None
            issued = self._issued()
            self.remember_groups()
            seen: set[tuple[str, int]] = set()
            for device, dump in self.dumps:
                self._read_one(device, dump, seen)
            if issued is not None:
                self.issued = issued
            self.last_read_s = time.monotonic()
            self.read_s = self.last_read_s - t0
        except Exception as exc:
            record.error(exc)

    def _read_one(self, device: str, dump: Any, seen: set[tuple[str, int]]) -> None:
        raw = dump(True, False)
        if not raw:
            return
        doc = json.loads(raw)
        entries = sorted(doc.get("entries") or (), key=lambda e: int(e.get("record_id", -1)))
        configs = doc.get("pg_config") or {}
        last = self.last_id.get(device, -1)
        lost_from: int | None = None
        lost = 0
        offset_ns = time.time_ns() - time.monotonic_ns()  # wall - monotonic, now
        for e in entries:
            rid = int(e["record_id"])
            created = int(e.get("time_created_ns") or 0)
            if rid <= last:
                continue
            # a gap: overwritten before it was read (before the first read, counted only
            # when the oldest entry left is the run's, so the lost ones were too)
            if rid > last + 1 and (last >= 0 or created >= self.start_wall_ns):
                lost += rid - last - 1
                lost_from = last + 1 if lost_from is None else lost_from
            last = rid
            if created < self.start_wall_ns or e.get("is_p2p"):
                continue
            self._entry(e, device, configs, created, offset_ns, seen)
        self.last_id[device] = last
        if lost:
            self.lost += lost
            record.error(RuntimeError(
                f"the Flight Recorder's ring ({device}) dropped {lost} collective(s) before "
                f"flowmap read them (record ids from {lost_from}); raise TORCH_FR_BUFFER_SIZE"))
        self._forget(entries)

    def _entry(self, e: dict[str, Any], device: str, configs: dict[str, Any], created: int,
               offset_ns: int, seen: set[tuple[str, int]]) -> None:
        group = e.get("process_group") or ["", ""]
        name = str(group[0])
        seq = int(e.get("collective_seq_id") or 0)
        if (name, seq) in seen or self._by_wrapper(e, created):
            return
        seen.add((name, seq))
        if len(self.dumps) > 1:  # two recorders may hold one collective
            if seq and seq <= self.last_seq.get(name, 0):
                return  # the other recorder's copy, written at an earlier read
            self.last_seq[name] = max(seq, self.last_seq.get(name, 0))
        backend, _, op = str(e.get("profiling_name") or "collective").rpartition(":")
        label = self._label(name, configs)
        d, nbytes = describe_entry(e.get("input_sizes") or [], e.get("input_dtypes") or [],
                                   _DEVICES.get(backend, device))
        owner = self.owner()
        src, dst = owner, label
        if op in ("broadcast", "scatter") and not self._is_first(label):
            src, dst = label, owner  # a non-root receives (the root: the group's first rank)
        record.hop(src, dst, op, d, nbytes, "collective", created - offset_ns,
                   step=self._step_at(created))

    def _by_wrapper(self, e: dict[str, Any], created: int) -> bool:
        """Whether the entry was issued inside a call the wrapper recorded, on its thread.

        A thread's recorded calls never overlap (only the outermost is recorded),
        so per thread, sorted by start, the one window to look at is found by bisection.
        """
        try:
            thread = int(e.get("thread_id") or 0)
        except (TypeError, ValueError):
            thread = 0
        by_thread = self._by_thread()
        for tid in (thread,) if thread else tuple(by_thread):
            spans = by_thread.get(tid)
            if spans:
                i = bisect.bisect_right(spans, (created, float("inf"))) - 1
                if i >= 0 and spans[i][0] <= created <= spans[i][1]:
                    return True
        return False

    def _by_thread(self) -> dict[int, list[tuple[int, int]]]:
        """The windows per thread, sorted by start; rebuilt when windows were added."""
        if self._sorted is None:  # once per read: windows added meanwhile are of later calls
            spans: dict[int, list[tuple[int, int]]] = {}
            for tid, start, end in list(self.windows):
                spans.setdefault(tid, []).append((start, end))
            for v in spans.values():
                v.sort()
            self._sorted = (len(self.windows), spans)
        return self._sorted[1]

    def _label(self, name: str, configs: dict[str, Any]) -> str:
        label = self.labels.get(name)
        if label is None:
            ranks = (configs.get(name) or {}).get("ranks")
            try:
                label = "group[" + ranks_text(json.loads(ranks)) + "]" if ranks else "group[?]"
            except (TypeError, ValueError):
                label = "group[?]"
            self.labels[name] = label
        return label

    def _is_first(self, label: str) -> bool:
        try:
            rank = int(self.c10d.get_rank())
        except Exception:
            rank = _rank_of(self.owner())
        first = label[len("group["):].split(",")[0].split("-")[0].rstrip("]")
        return first == str(rank)

    def _step_at(self, created: int) -> int | None:
        i = bisect.bisect_right(self.steps, (created, float("inf"))) - 1
        return self.steps[max(i, 0)][1]

    def _forget(self, entries: list[dict[str, Any]]) -> None:
        """Drop the windows and step changes no entry still to come can fall in."""
        if not entries:
            return
        newest = max(int(e.get("time_created_ns") or 0) for e in entries)
        # windows are appended as calls end: the leading ones ended first (a slice `del`
        # leaves the wrapper's appends from other threads alone)
        w = self.windows
        k = 0
        while k < len(w) and w[k][2] < newest:
            k += 1
        del w[:k]
        self._sorted = None
        i = bisect.bisect_right(self.steps, (newest, float("inf"))) - 1
        if i > 0:
            del self.steps[:i]

    # -- the poller -----------------------------------------------------------
    def start(self) -> None:
        atexit.register(self.final_read)
        # a forked multiprocessing child leaves through os._exit (no atexit): its finalizers
        # run, this one before the one that closes the shard (exitpriority -100)
        util = sys.modules.get("multiprocessing.util")
        if util is not None:
            try:
                util.Finalize(self, self.final_read, exitpriority=-50)
            except Exception:
                pass
        threading.Thread(target=self._poll, name="flowmap-flight-recorder", daemon=True).start()

    def _poll(self) -> None:
        while not self.stopped:
            time.sleep(POLL_S)
            if os.getpid() != self.pid or not self.lock.acquire(blocking=False):
                continue
            try:  # c10d is called only under the lock, and never once stopped (final_read)
                if not self.stopped and state.tracer is not None and self.due():
                    self._read()
            except Exception as exc:
                record.error(exc)
            finally:
                self.lock.release()

    def final_read(self) -> None:
        """The last read, at exit; the poller's thread calls c10d no more.

        It waits for a poll under way: c10d's calls release the GIL, and a daemon
        thread that comes back for it while the interpreter finalizes is ended by
        `pthread_exit`, which inside C++ is `std::terminate`: the program, traced, would
        end in SIGABRT ("terminate called without an active exception").
        """
        if os.getpid() != self.pid:
            self.stopped = True
            return
        got = self.lock.acquire(timeout=FINAL_WAIT_S)
        try:  # a poll stuck past FINAL_WAIT_S: no read beside it, the poller stops after it
            if got and not self.stopped and state.tracer is not None:
                self._read()
        finally:
            self.stopped = True
            if got:
                self.lock.release()


def _rank_of(owner: str) -> int:
    tail = owner.rsplit("rank", 1)[-1]
    return int(tail) if tail.isdigit() else -1
