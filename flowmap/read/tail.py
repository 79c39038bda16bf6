"""Follow one shard as it grows: its offset, its decoder, and what it holds so far.

A poll reads from the offset to the first NUL (a mapped shard's reserved,
unwritten tail) and hands the complete lines to the very decoder the
finished reader uses (`flowmap.read.reader.Decoder`); a line still being
written waits for its newline. A hop line equal to one seen before but for
its time skips JSON decoding and checking (its checked event is reused),
and past the detail window a run of such lines folds at once. Counter
samples, marks and drops past `MAX_RECORDS` are folded, oldest first, into
per-name records whose count, sum, least, largest and last value are exact.
"""

from __future__ import annotations

import dataclasses
import os
from operator import attrgetter, ne
from typing import Any, BinaryIO

from flowmap import trace_format as tf
from flowmap.errors import NotATrace
from flowmap.read.bounds import bound_records
from flowmap.read.events import SeamStep, Shard
from flowmap.read.fold import SeamStepFolder
from flowmap.read.hop_runs import add_equal_hops, span
from flowmap.read.plain import as_int, as_text, show_path
from flowmap.read.reader import MAX_HEADER, Decoder, loads_strict, open_regular, parse_header
from flowmap.read.validate import CHECKS

_CELL_HOPS = attrgetter("hops")
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
    """One shard being followed: its offset, its decoder's state, and what it holds so far."""

    def __init__(self, path: str, budget: int | None) -> None:
        self.path = path
        self.budget = budget
        self.offset = 0  # bytes handled: the header and every complete line after it
        self.pos = 0  # bytes read: `offset` plus `partial`, or past it inside a skipped line
        self.partial = b""  # a line read in part (read across polls: it may pass MAX_READ)
        self.decoder: Decoder | None = None
        self.skipping = False  # inside an over-long line, until its newline
        self.problem: str | None = None  # why this file is not read (not a flowmap shard)
        self.seen: dict[bytes, list[Any]] = {}  # hop lines' bytes after the time -> the event
        self.old: dict[bytes, list[Any]] = {}  # the generation before `seen`
        self.reused = 0  # hop lines that took a remembered event, this generation
        self.learned = 0  # hop lines checked and remembered, this generation
        self.unpaid = False  # the generation before did not pay
        self.learning = True  # whether hop lines not remembered are learned
        self.steps_made: list[SeamStep] = []  # each fold cell's record, in the cells' order
        self.steps_made_hops: list[int] = []  # ... and the cell's hops when it was made
        self.capped = False  # the last poll stopped at MAX_READ: more is waiting

    @property
    def shard(self) -> Shard | None:
        return self.decoder.shard if self.decoder is not None else None

    def poll(self) -> int:
        """Read what was appended (up to MAX_READ); returns the bytes handled (0: nothing new)."""
        if self.problem is not None:
            return 0
        try:
            with open_regular(self.path) as f:
                if os.fstat(f.fileno()).st_size < self.pos:  # cut and rewritten: start over
                    self.offset, self.decoder, self.skipping = 0, None, False
                    self.pos, self.partial = 0, b""
                    self.seen, self.old, self.learning, self.unpaid = {}, {}, True, False
                    self.reused = self.learned = 0
                    self.steps_made, self.steps_made_hops = [], []
                f.seek(self.pos)
                data, self.capped = _read_to_nul(f)
        except NotATrace:
            return 0  # vanished between listing and opening; the next listing says so
        start = self.offset
        self.pos += len(data)
        if self.partial:
            data, self.partial = self.partial + data, b""
        if self.decoder is None:
            data = self._start(data)
            if self.decoder is None:
                return 0
        self._lines(data)
        return self.offset - start

    def _start(self, data: bytes) -> bytes:
        """Read the header line once it is complete; returns the bytes after it."""
        nl = data.find(b"\n", 0, MAX_HEADER + 1)
        if nl < 0:
            if len(data) > MAX_HEADER:
                self.problem = f"{show_path(self.path)} is not a flowmap trace; skipped"
            else:
                self.partial = data  # the header's next bytes come in a later poll
            return b""
        try:
            header = parse_header(data[:nl + 1], self.path)
        except NotATrace as exc:
            self.problem = f"{exc}; skipped"
            return b""
        argv = header.get("argv")
        shard = Shard(
            path=self.path, pid=as_int(header.get("pid")), ppid=as_int(header.get("ppid")),
            host=as_text(header.get("host"), ""),
            argv=[as_text(a, "") for a in argv if type(a) is str][:1000]
            if type(argv) is list else [],
            process=as_text(header.get("process"), None),
            t0_mono_ns=as_int(header.get("t0_mono_ns")), t0_wall_ns=as_int(header.get("t0_wall_ns")),
        )
        self.decoder = Decoder(shard, self.budget)
        self.offset += nl + 1
        return data[nl + 1:]

    def _lines(self, data: bytes) -> None:
        """Hand the complete lines of `data` to the decoder, as the finished reader's blocks do."""
        d = self.decoder
        assert d is not None
        if self.skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self.offset += len(data)
                return
            self.skipping = False
            self.offset += nl + 1
            data = data[nl + 1:]
        end = data.rfind(b"\n")
        if end >= 0:
            self._feed(data[:end + 1])
            self.offset += end + 1
            data = data[end + 1:]
        if len(data) > tf.MAX_LINE:  # a partial line already past the bound: skip it
            self.skipping = True
            d.line += 1
            d.bad(d.line, f"a line over {tf.MAX_LINE} bytes")
            self.offset += len(data)
        else:  # kept, not read again: a line longer than one poll's read still completes
            self.partial = data
        bound_records(d.shard)

    def _feed(self, data: bytes) -> None:
        """Decode the complete lines of `data` (each ends in a newline) in order.

        One regular expression takes a run of hop lines equal but for their time at once
        (a back-reference to the first line's bytes after its time), another their times.
        A run whose bytes after the time were seen before (most lines of a steady run)
        skips JSON decoding and checking, and folds at once (`flowmap.read.hop_runs`): the per-line work
        is in C, not a Python loop. Other lines go to the decoder, as many at once as
        come together.
        """
        d = self.decoder
        assert d is not None
        seen = self.seen
        feed = _Feed(d)
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
        d = self.decoder
        assert d is not None
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
        d = self.decoder
        if d is None:
            return None
        sh = d.shard
        copy = dataclasses.replace(
            sh, hops=list(sh.hops), counters=list(sh.counters), marks=list(sh.marks),
            drops=list(sh.drops), errors=list(sh.errors), halves=list(sh.halves),
            seam_steps=list(sh.seam_steps), counter_folds=list(sh.counter_folds),
            mark_folds=list(sh.mark_folds), drop_folds=list(sh.drop_folds),
            bad_notes=list(sh.bad_notes),
        )
        if d.folder is not None and d.cut is not None:
            copy.seam_steps += self._folded_steps(d.folder)
            copy.fold_cut = (d.cut.step, d.cut.t_ns)
        return copy

    def retire(self, before: int) -> None:
        """Forget the folded steps below `before` (a live watch's blocks hold them now,
        `flowmap.read.blocks`): a step's hops that come later fold into a record of their
        own. Right after `snapshot`, whose records are the ones forgotten."""
        d = self.decoder
        if d is None:
            return
        sh = d.shard  # `a` events of an aggregated trace
        sh.seam_steps[:] = [st for st in sh.seam_steps if st.step is None or st.step >= before]
        if d.folder is None:
            return
        cells = d.folder.cells  # keyed (src, dst, name, step, transport)
        keep = [k[3] is None or k[3] >= before for k in cells]
        if all(keep):
            return
        d.folder.cells = {k: c for (k, c), ok in zip(cells.items(), keep) if ok}
        if len(self.steps_made) == len(keep):  # in the cells' order: forget the same ones
            self.steps_made = [m for m, ok in zip(self.steps_made, keep) if ok]
            self.steps_made_hops = [n for n, ok in zip(self.steps_made_hops, keep) if ok]
        else:  # not made for these cells: made anew at the next snapshot
            self.steps_made, self.steps_made_hops = [], []

    def _folded_steps(self, folder: SeamStepFolder) -> list[SeamStep]:
        """`folder.seam_steps(...)`, building anew only the cells that took hops since the
        last snapshot (a long run's older steps no longer change), found in C: the cells'
        hop counts, compared with the last snapshot's in their (insertion) order."""
        d = self.decoder
        assert d is not None
        cells = folder.cells
        made, counts = self.steps_made, self.steps_made_hops  # in the order of `cells`
        now = list(map(_CELL_HOPS, cells.values()))
        if len(now) < len(counts):  # cells are only ever added; should that change: anew
            made, counts = [], []
        grown = list(map(ne, now, counts))  # as long as the shorter: the cells known before
        changed = []
        i = -1
        while True:
            try:
                i = grown.index(True, i + 1)
            except ValueError:
                break
            changed.append(i)
        if changed or len(now) > len(made):
            keys = list(cells)
            one = SeamStepFolder(folder.pid)

            def make(i: int) -> SeamStep:
                one.cells = {keys[i]: cells[keys[i]]}
                return one.seam_steps(d.strings.__getitem__, d.schemas.__getitem__)[0]

            made = made[:]
            for i in changed:
                made[i] = make(i)
            made += [make(i) for i in range(len(made), len(now))]  # the cells new since
        self.steps_made, self.steps_made_hops = made, now
        return sorted(made, key=_T_NS)


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
    """What `ShardTail._feed` has gathered and not yet handed on, in the order read."""

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


