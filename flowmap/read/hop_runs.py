"""Hop lines equal but for their time, taken at once: what a growing shard is mostly made of.

A steady run writes the same hop line again and again but for its time. The
follower of a shard (`flowmap.read.tail`) matches such a run with one regular
expression (`flowmap.trace_format.HOP_RUN`) and hands it here: its lines are
taken as the decoder takes them one by one, and past the detail window the
whole run is added to its per-step record at once.
"""

from __future__ import annotations

from typing import Any

from flowmap.read.reader import Decoder, Hop


def span(times: list[bytes]) -> tuple[int, int, int]:
    """Least and largest of `times` (JSON integers without a leading zero), and the longest's
    digits: compared as bytes where all have as many digits (most runs), in C."""
    lens = set(map(len, times))
    if len(lens) == 1:
        return int(min(times)), int(max(times)), len(times[0])
    ints = list(map(int, times))
    return min(ints), max(ints), max(lens)


def add_equal_hops(d: Decoder, ev: Any, times: list[bytes]) -> None:
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


def add_hop(d: Decoder, ev: list[Any]) -> None:
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
