"""A shard's hop lines taken without decoding read as the decoder reads them line by line.

GIVEN shards of steady hop lines (runs equal but for their time, past a small detail
window and inside it), lines whose every hop names its own item, times the format
refuses, item ids holding the bytes a hop line starts with, and other events between,
WHEN the same bytes are fed in random pieces to a `ShardFeed` that takes hop lines
through `flowmap.read.hop_lines` and to one that hands every line to the decoder,
THEN both shards hold the same records: kept hops, folded steps, counters, events and
bad lines.
"""

from __future__ import annotations

import os
import random

import pytest
import runs

from flowmap.read.events import Shard
from flowmap.read.reader import MAX_HEADER, ShardFeed, new_shard, parse_header


def _write(path: str, kind: str) -> bytes:
    w = runs.ShardWriter(path, 1)
    t = 0
    for step in range(16):
        w.step(t, step)
        for block in range(5):
            for k in range(6):
                t += 3
                items = {"steady": None, "distinct": [step * 100 + block * 10 + k],
                         "look-alike": [["h", 7 + k % 2], '["h",']}[kind]
                w.hop(t, "rollout/0", "buffer" if block % 2 else "driver", "traj",
                      [runs.tensor("x", (4 + block % 3,))], step=step,
                      version=step - block % 2, items=items)
            if block == 2:
                w.counter(t, "depth", float(step))
    good = w.lines[-1]
    start = good[:good.index(",", 5) + 1]
    w.lines += [good.replace(start, '["h",0491,'), good.replace(start, '["h",' + "9" * 16 + ","),
                good.replace(start, '["h",-5,'), good.replace(start, '["h", 492,')]
    w.close(t + 1)
    with open(path, "rb") as f:
        return f.read()


def _read(data: bytes, hop_lines: bool, pieces: list[int], keep: int | None) -> Shard:
    nl = data.index(b"\n", 0, MAX_HEADER) + 1
    feed = ShardFeed(new_shard("s", parse_header(data[:nl], "s")), keep, hop_lines=hop_lines)
    at = nl
    for cut in [*pieces, len(data)]:
        if cut > at:
            feed.take(data[at:cut])
            at = cut
    return feed.snapshot()


def _records(sh: Shard) -> tuple[object, ...]:
    return (sh.hops, sorted(sh.seam_steps, key=lambda s: (s.t_ns, s.src, s.dst, s.step)),
            sh.counters, sh.num_events, sh.bad_lines, sh.bad_notes, sh.fold_cut, sh.truncated)


@pytest.mark.parametrize("kind", ["steady", "distinct", "look-alike"])
@pytest.mark.parametrize("keep", [None, 0, 40])
def test_hop_lines_taken_at_once_read_as_the_decoder_reads_them(tmp_path, kind, keep):
    data = _write(os.path.join(tmp_path, "h-1-1.flowmap.jsonl"), kind)
    rng = random.Random(f"{kind}{keep}")
    for _ in range(6):
        pieces = sorted(rng.sample(range(len(data)), rng.randrange(0, 12)))
        fast, plain = _read(data, True, pieces, keep), _read(data, False, pieces, keep)
        assert _records(fast) == _records(plain), pieces
    taken = len(plain.hops) + sum(s.hops for s in plain.seam_steps)
    if kind == "look-alike":  # item ids that are lists: refused by the format, every one
        assert (plain.bad_lines, taken) == (484, 0)
    else:
        assert (plain.bad_lines, taken) == (2, 482)
