"""Hop lines equal but for their time, taken without decoding: what a shard is mostly made of.

A steady run writes the same hop line again and again but for its time. A
shard's feed (`flowmap.read.reader.ShardFeed`: a finished shard's and a live
tail's) hands its complete lines to a `HopLines` before its decoder (a
steady shard reads about three times as fast): one regular expression
(`flowmap.trace_format.HOP_RUN`, the grammar's) takes a run of hop lines
equal but for their time at once; a run whose bytes after the time were
seen before skips JSON decoding and checking (the checked event is reused),
is taken as the decoder takes its lines one by one, and past the detail
window is added to its per-step record at once. Every other line goes to the
decoder, in order. The decoder is the reader's (`d`: what `Decoder` holds).
"""

from __future__ import annotations

from typing import Any

from flowmap import trace_format as tf
from flowmap.read.events import Hop
from flowmap.read.plain import loads_strict
from flowmap.read.validate import CHECKS

_START = len(tf.HOP_LINE_START)  # a hop line's bytes before its time
# Distinct hop lines (but for their time) a shard remembers as already checked, per
# generation. A full generation becomes the old one (the one before is forgotten), and a
# line found in the old one is kept in the new: lines that come back stay remembered (a
# working set of up to a generation, in any order), while a long run's older steps' lines
# (they do not come back) are forgotten within two generations, so what a watch holds does not grow with the run. Should two generations in
# a row not have paid (fewer lines reused an event than were learned: lines that are all
# distinct, e.g. each naming its own item, decode faster in a batch), learning stops.
SEEN_GENERATION = 256


class HopLines:
    """What one shard's feed remembers of its hop lines, and the way it takes them."""

    def __init__(self, d: Any) -> None:
        self.d = d  # the shard's decoder (`flowmap.read.reader.Decoder`)
        self.seen: dict[bytes, list[Any]] = {}  # hop lines' bytes after the time -> the event
        self.old: dict[bytes, list[Any]] = {}  # the generation before `seen`
        self.reused = 0  # hop lines that took a remembered event, this generation
        self.learned = 0  # hop lines checked and remembered, this generation
        self.unpaid = False  # the generation before did not pay
        self.learning = True  # whether hop lines not remembered are learned

    def __call__(self, data: bytes, end: int) -> None:
        """Decode the complete lines `data[:end]` (`end`: the last one's newline) in order.

        One regular expression takes a run of hop lines equal but for their time at once
        (a back-reference to the first line's bytes after its time), another their times.
        A run whose bytes after the time were seen before (most lines of a steady run)
        skips JSON decoding and checking, and folds at once (`add_equal_hops`): the per-line work
        is in C, not a Python loop. Other lines go to the decoder, as many at once as
        come together.
        """
        seen = self.seen
        feed = _Feed(self.d)
        data = data[:end + 1]
        pos, n = 0, len(data)
        while pos < n:
            if not self.learning and not self.seen:  # learning stopped: the rest to the decoder
                feed.flush()
                self.d.batch(data[pos:n - 1].split(b"\n"))
                return
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
        d = self.d
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


class _Feed:
    """What `HopLines` has gathered and not yet handed on, in the order read."""

    __slots__ = ("d", "slow", "same", "last")

    def __init__(self, d: Any) -> None:
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

    def line(self, tail: HopLines, raw: bytes, comma: int) -> None:
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


def span(times: list[bytes]) -> tuple[int, int, int]:
    """Least and largest of `times` (JSON integers without a leading zero), and the longest's
    digits: compared as bytes where all have as many digits (most runs), in C."""
    lens = set(map(len, times))
    if len(lens) == 1:
        return int(min(times)), int(max(times)), len(times[0])
    ints = list(map(int, times))
    return min(ints), max(ints), max(lens)


def add_equal_hops(d: Any, ev: Any, times: list[bytes]) -> None:
    """Hop lines equal but for their `times`, as `Decoder.batch` takes them one by one.

    Past the detail window, where every one of them folds (their step lies past the
    window's end), the first is folded as one hop and the rest are added to its cell at
    once: the same count, sums and times as `SeamStepFolder.add_event` reaches one hop at
    a time (equal hops leave least and largest bytes, versions and schemas as they are).
    """
    folder, cut, sh = d.folder, d.cut, d.shard
    step = ev[8]
    if (len(times) < 2 or folder is None or cut is None or d.keep is None
            or len(sh.hops) < d.keep or step is None or cut.step is None or step <= cut.step):
        for t in times:
            ev[1] = int(t)
            add_hop(d, ev)
        return
    ev[1] = int(times[0])
    add_hop(d, ev)  # folds: its step is past the window
    rest = times[1:]
    n = len(rest)
    lo, hi, _ = span(rest)
    d.line += n
    sh.num_events += n
    folder.hops += n
    c = folder.cells[(ev[2], ev[3], ev[4], step, ev[10])]
    c.hops += n
    c.nbytes_sum += ev[6] * n
    c.num_items += (len(ev[11]) if ev[11] else 0) * n
    c.t_first = min(c.t_first, d.t0 + lo * 1000)
    c.t_last = max(c.t_last, d.t0 + hi * 1000)


def add_hop(d: Any, ev: list[Any]) -> None:
    """A checked hop event, as `Decoder.batch` takes one (kept, or folded past the window)."""
    sh = d.shard
    d.line += 1
    sh.num_events += 1
    if d.keep is not None and len(sh.hops) >= d.keep and d.fold_hop(ev):
        return
    s = d.strings
    sh.hops.append(Hop(d.t0 + ev[1] * 1000, sh.pid, s[ev[2]], s[ev[3]], s[ev[4]], ev[6],
                       d.schemas[ev[5]], tuple(ev[7]), ev[8], ev[9], s[ev[10]],
                       tuple(ev[11]) if ev[11] else ()))
