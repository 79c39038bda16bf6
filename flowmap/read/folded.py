"""Build the records of folded events: what a process folded under `trace --aggregate`.

Kept out of `reader` so that the per-event decoding there stays about hops;
the event's fields are checked against the format before these run.
"""

from __future__ import annotations

from typing import Any

from flowmap.read.events import CounterFold, DropFold, MarkFold, SeamStep
from flowmap.read.halves import ReceiveFold, SendFold


def _seam_step(decoder: Any, ev: list[Any]) -> SeamStep:
    """The `SeamStep` of an `a` or `X` event (the fields they share)."""
    s, sh, t0 = decoder.strings, decoder.shard, decoder.t0
    return SeamStep(
        t0 + ev[1] * 1000, t0 + ev[16] * 1000, sh.pid, s[ev[2]], s[ev[3]], s[ev[4]], ev[6],
        s[ev[7]], ev[8], ev[9], ev[10], ev[11], ev[12], ev[13], ev[14], ev[15],
        decoder.schemas[ev[5]],
    )


def build(decoder: Any, ev: list[Any]) -> None:
    """Append the `SeamStep` of the `a` event `ev` to the shard `decoder` reads."""
    decoder.shard.seam_steps.append(_seam_step(decoder, ev))
    decoder.shard.num_events += 1


def build_send(decoder: Any, ev: list[Any]) -> None:
    """An `X` event: send halves of one seam, step and channel."""
    decoder.shard.halves.append(SendFold(_seam_step(decoder, ev), decoder.strings[ev[17]]))
    decoder.shard.num_events += 1


def build_receive(decoder: Any, ev: list[Any]) -> None:
    """A `Y` event: how many messages an owner took from a channel in a step."""
    s, sh, t0 = decoder.strings, decoder.shard, decoder.t0
    sh.halves.append(ReceiveFold(t0 + ev[1] * 1000, t0 + ev[9] * 1000, sh.pid, s[ev[2]],
                                 s[ev[3]], s[ev[4]], s[ev[5]], ev[6], ev[7], ev[8]))
    sh.num_events += 1


def build_counter(decoder: Any, ev: list[Any]) -> None:
    """A `C` event: one counter's samples in one step."""
    s, sh, t0 = decoder.strings, decoder.shard, decoder.t0
    sh.counter_folds.append(CounterFold(
        t0 + ev[1] * 1000, t0 + ev[10] * 1000, sh.pid, s[ev[2]], s[ev[3]], ev[4], ev[5],
        float(ev[6]), float(ev[7]), float(ev[8]), float(ev[9]),
    ))
    sh.num_events += 1


def build_mark(decoder: Any, ev: list[Any]) -> None:
    """An `M` event: one marker name's markers in one step."""
    s, sh, t0 = decoder.strings, decoder.shard, decoder.t0
    sh.mark_folds.append(MarkFold(t0 + ev[1] * 1000, t0 + ev[6] * 1000, sh.pid, s[ev[2]],
                                  s[ev[3]], ev[4], ev[5]))
    sh.num_events += 1


def build_drop(decoder: Any, ev: list[Any]) -> None:
    """A `D` event: one owner's drops for one reason in one step."""
    s, sh, t0 = decoder.strings, decoder.shard, decoder.t0
    sh.drop_folds.append(DropFold(t0 + ev[1] * 1000, t0 + ev[7] * 1000, sh.pid, s[ev[2]],
                                  s[ev[3]], ev[4], ev[5], ev[6]))
    sh.num_events += 1
