"""Follow one shard as it grows: its offset, and the finished reader's own feed of its lines.

A poll reads from the offset to the first NUL (a mapped shard's reserved,
unwritten tail) and hands the bytes to the `flowmap.read.reader.ShardFeed`
that `read_shard` feeds a finished file through, so a growing shard reads
as the finished one: the same header, decoder, checks and handling of
partial and over-long lines. Hop lines equal to one seen before but for
their time skip JSON decoding and checking (their checked event is reused),
and past the detail window a run of such lines folds at once. Counter
samples, marks and drops past `MAX_RECORDS` are folded, oldest first, into
per-name records whose count, sum, least, largest and last value are exact.
"""

from __future__ import annotations

import dataclasses
import os
from operator import attrgetter
from typing import Any, BinaryIO

from flowmap import trace_format as tf
from flowmap.errors import NotATrace
from flowmap.read.bounds import bound_records
from flowmap.read.events import SeamStep, Shard
from flowmap.read.fold import SeamStepFolder
from flowmap.read.hop_runs import add_equal_hops, span
from flowmap.read.plain import show_path
from flowmap.read.reader import (
    MAX_HEADER,
    Decoder,
    ShardFeed,
    loads_strict,
    new_shard,
    open_regular,
    parse_header,
)
from flowmap.read.validate import CHECKS

_START = len(tf.HOP_LINE_START)  # a hop line's bytes before its time
_T_NS = attrgetter("t_ns")
MAX_READ = 4 << 20  # bytes taken from one shard in one poll; the rest waits for the next
FIRST_READ = 64 << 10  # a poll's first read of a shard; each next one twice the last
# Distinct hop lines (but for their time) a shard remembers as already checked, per
# generation. A full generation becomes the old one (the one before is forgotten), and a
# line found in the old one is kept in the new: lines that come back stay remembered (a
# working set of up to a generation, in any order), while a long run's older steps' lines
# (they do not come back) are forgotten within two generations, so what a watch holds does not grow with the run. Should two generations in
# a row not have paid (fewer lines reused an event than were learned: lines that are all
# distinct, e.g. each naming its own item, decode faster in a batch), learning stops.
SEEN_GENERATION = 256


class ShardTail:
    """One shard being followed: its offset, its feed, and what it remembers of hop lines."""

    def __init__(self, path: str, budget: int | None) -> None:
        self.path = path
        self.budget = budget
        self.problem: str | None = None  # why this file is not read (not a flowmap shard)
        self.capped = False  # the last poll stopped at MAX_READ: more is waiting
        self._reset()

    def _reset(self) -> None:
        """Read from the start (again: the file was cut and written anew)."""
        self.pos = 0  # bytes read
        self.head = b""  # the header's first bytes, until its newline is read
        self.feed: ShardFeed | None = None
        self.seen: dict[bytes, list[Any]] = {}  # hop lines' bytes after the time -> the event
        self.old: dict[bytes, list[Any]] = {}  # the generation before `seen`
        self.reused = 0  # hop lines that took a remembered event, this generation
        self.learned = 0  # hop lines checked and remembered, this generation
        self.unpaid = False  # the generation before did not pay
        self.learning = True  # whether hop lines not remembered are learned
        self.made: dict[Any, tuple[int, SeamStep]] = {}  # fold cell -> (its hops, its record)

    @property
    def shard(self) -> Shard | None:
        return self.feed.shard if self.feed is not None else None

    def poll(self) -> int:
        """Read what was appended (up to MAX_READ); returns the bytes handled (0: nothing new)."""
        if self.problem is not None:
            return 0
        try:
            with open_regular(self.path) as f:
                if os.fstat(f.fileno()).st_size < self.pos:  # cut and rewritten: start over
                    self._reset()
                f.seek(self.pos)
                data, self.capped = _read_to_nul(f)
        except NotATrace:
            return 0  # vanished between listing and opening; the next listing says so
        self.pos += len(data)
        got = 0
        if self.feed is None:
            data = self.head + data
            nl = data.find(b"\n", 0, MAX_HEADER + 1)
            if nl < 0:
                if len(data) > MAX_HEADER:
                    self.problem = f"{show_path(self.path)} is not a flowmap trace; skipped"
                else:
                    self.head = data  # the header's next bytes come in a later poll
                return 0
            try:
                header = parse_header(data[:nl + 1], self.path)
            except NotATrace as exc:
                self.problem = f"{exc}; skipped"
                return 0
            self.feed = ShardFeed(new_shard(self.path, header), self.budget, self._lines)
            data, got, self.head = data[nl + 1:], nl + 1, b""
        before = self.feed.handled
        self.feed.take(data)
        bound_records(self.feed.shard)
        return got + self.feed.handled - before

    def _lines(self, data: bytes, end: int) -> None:
        """Decode the complete lines `data[:end]` (`end`: the last one's newline) in order.

        One regular expression takes a run of hop lines equal but for their time at once
        (a back-reference to the first line's bytes after its time), another their times.
        A run whose bytes after the time were seen before (most lines of a steady run)
        skips JSON decoding and checking, and folds at once (`flowmap.read.hop_runs`): the per-line work
        is in C, not a Python loop. Other lines go to the decoder, as many at once as
        come together.
        """
        assert self.feed is not None
        seen = self.seen
        feed = _Feed(self.feed.decoder)
        data = data[:end + 1]
        pos, n = 0, len(data)
        while pos < n:
            m = tf.HOP_RUN.match(data, pos)
            if m is None:  # lines not of a hop's plain form, up to the next hop line
                nxt = data.find(b'\n' + tf.HOP_LINE_START, pos)
                nxt = n - 1 if nxt < 0 else nxt
                feed.flush_same()
                feed.slow += data[pos:nxt].split(b"\n")
                pos = nxt + 1
                continue
            end = m.end()
            ts = [m.group(1), *tf.HOP_NEXT_TIMES.findall(data, pos, end)]
            after = m.group(2)
            pos = end
            after = after[:-1]  # without its newline
            ev = seen.get(after)
            if ev is None and after in self.old:
                ev = self._keep(after, self.old[after])
                seen = self.seen
            if ev is not None:
                self.reused += len(ts)
            elif self.learning and _START + len(ts[0]) + len(after) <= tf.MAX_LINE:
                feed.flush()  # the strings and schemas it names may be among the slow lines
                ev = self._learn(tf.HOP_LINE_START + ts[0] + after, _START + len(ts[0]))
                self.reused += len(ts) - 1
                seen = self.seen
            _, hi, longest = span(ts)
            if ev is None or hi > tf.MAX_TIME_US or _START + longest + len(after) > tf.MAX_LINE:
                for t in ts:  # some of them are not taken as they are: one by one
                    feed.line(self, tf.HOP_LINE_START + t + after, len(t) + _START)
                continue
            feed.flush_slow()
            if ev is not feed.last:
                feed.flush_same()
                feed.last = ev
            feed.same += ts
        feed.flush()

    def _learn(self, raw: bytes, comma: int) -> list[Any] | None:
        """The event of hop line `raw` if it is valid as the finished reader checks it, kept
        under its bytes after the time (ids only grow, so a valid suffix stays valid)."""
        assert self.feed is not None
        d = self.feed.decoder
        if comma < 0 or b"\\ud" in raw or b"\\uD" in raw:
            return None
        try:
            ev = loads_strict(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            return None
        if type(ev) is not list or not CHECKS[tf.HOP](ev, d.strings, d.schemas):
            return None
        if len(self.seen) >= SEEN_GENERATION and not self._turn():
            return ev
        self.seen[raw[comma:]] = ev
        self.learned += 1
        return ev

    def _keep(self, key: bytes, ev: list[Any]) -> list[Any]:
        """Keep `ev` (found in the old generation) in the new one; returns it."""
        if self.learning and (len(self.seen) < SEEN_GENERATION or self._turn()):
            self.seen[key] = ev
        return ev

    def _turn(self) -> bool:
        """The full generation becomes the old one; returns whether learning goes on."""
        paid = self.reused >= self.learned
        self.learning, self.unpaid = paid or not self.unpaid, not paid
        self.old, self.seen, self.reused, self.learned = self.seen, {}, 0, 0
        return self.learning

    def snapshot(self) -> Shard | None:
        """The shard as `read_shard` would return it for the bytes handled so far."""
        if self.feed is None:
            return None
        d = self.feed.decoder
        sh = d.shard
        copy = dataclasses.replace(
            sh, hops=list(sh.hops), counters=list(sh.counters), marks=list(sh.marks),
            drops=list(sh.drops), errors=list(sh.errors), halves=list(sh.halves),
            seam_steps=list(sh.seam_steps), counter_folds=list(sh.counter_folds),
            mark_folds=list(sh.mark_folds), drop_folds=list(sh.drop_folds),
            bad_notes=list(sh.bad_notes),
        )
        if d.folder is not None and d.cut is not None:
            copy.seam_steps += self._folded_steps(d)
            copy.fold_cut = (d.cut.step, d.cut.t_ns)
        return copy

    def _folded_steps(self, d: Decoder) -> list[SeamStep]:
        """`d.folder.seam_steps(...)`, building anew only the records of cells that took hops
        since the last snapshot (a long run's older steps no longer change)."""
        assert d.folder is not None
        one = SeamStepFolder(d.folder.pid)
        made = {}
        for key, cell in d.folder.cells.items():
            got = self.made.get(key)
            if got is None or got[0] != cell.hops:
                one.cells = {key: cell}
                got = (cell.hops, one.seam_steps(d.strings.__getitem__, d.schemas.__getitem__)[0])
            made[key] = got
        self.made = made
        return sorted((st for _, st in made.values()), key=_T_NS)

    def retire(self, before: int) -> None:
        """Forget the folded steps below `before` (a live watch's blocks hold them now,
        `flowmap.read.blocks`): a step's hops that come later fold into a record of their
        own. Right after `snapshot`, whose records are the ones forgotten."""
        if self.feed is None:
            return
        d = self.feed.decoder
        sh = d.shard  # `a` events of an aggregated trace
        sh.seam_steps[:] = [st for st in sh.seam_steps if st.step is None or st.step >= before]
        if d.folder is not None:
            d.folder.cells = {k: c for k, c in d.folder.cells.items()
                              if k[3] is None or k[3] >= before}  # keyed (src, dst, name, step, ...)


def _read_to_nul(f: BinaryIO) -> tuple[bytes, bool]:
    """The bytes from `f`'s position to its first NUL (a mapped shard's reserved, unwritten
    tail, tens of MB in a long run) or its end, at most MAX_READ; and whether more waits.

    Read in growing pieces, so a poll reads about what was appended, not the zeros after it.
    """
    pieces = []
    got, size = 0, FIRST_READ
    while got < MAX_READ:
        want = min(size, MAX_READ - got)
        piece = f.read(want)
        nul = piece.find(b"\0")
        if nul >= 0:
            pieces.append(piece[:nul])
            return b"".join(pieces), False
        pieces.append(piece)
        got += len(piece)
        if len(piece) < want:
            return b"".join(pieces), False
        size *= 2
    return b"".join(pieces), True


class _Feed:
    """What `ShardTail._lines` has gathered and not yet handed on, in the order read."""

    __slots__ = ("d", "slow", "same", "last")

    def __init__(self, d: Decoder) -> None:
        self.d = d
        self.slow: list[bytes] = []  # lines for the decoder
        self.same: list[bytes] = []  # times of consecutive hop lines equal but for their time
        self.last: list[Any] | None = None  # their event

    def flush_slow(self) -> None:
        if self.slow:
            self.d.batch(self.slow)
            self.slow = []

    def flush_same(self) -> None:
        if self.same:
            add_equal_hops(self.d, self.last, self.same)
            self.same = []

    def flush(self) -> None:
        self.flush_slow()
        self.flush_same()

    def line(self, tail: ShardTail, raw: bytes, comma: int) -> None:
        """One hop line, as a group takes them when some are not taken as they are."""
        t = raw[_START:comma]
        key = raw[comma:]
        ev = tail.seen.get(key)
        if ev is None and key in tail.old:
            ev = tail._keep(key, tail.old[key])
        if len(raw) > tf.MAX_LINE:
            ev = None
        elif ev is None and tail.learning:
            self.flush()
            ev = tail._learn(raw, comma)
        if ev is not None and int(t) <= tf.MAX_TIME_US:
            self.flush_slow()
            if ev is not self.last:
                self.flush_same()
                self.last = ev
            self.same.append(t)
            return
        self.flush_same()
        self.slow.append(raw)


