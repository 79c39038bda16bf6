"""Build the records of folded events: what a process folded under `trace --aggregate`.

Kept out of `reader` so that the per-event decoding there stays about hops;
the event's fields are checked against the format before these run, and read
here by name (`flowmap.read.fields`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowmap import trace_format as tf
from flowmap.read.events import (
    CounterFold,
    DropFold,
    MarkFold,
    ReceiveFold,
    SeamStep,
    SendFold,
    Shard,
)
from flowmap.read.fields import Interned, named


def _seam_step(f: dict[str, Any], pid: int) -> SeamStep:
    """The `SeamStep` of an `a` or `X` event's fields (the fields they share)."""
    return SeamStep(
        t_ns=f["t_us"], t_first_ns=f["t_first_us"], pid=pid, src=f["src"], dst=f["dst"],
        name=f["name"], step=f["step"], transport=f["transport"], hops=f["hops"],
        nbytes_sum=f["nbytes_sum"], nbytes_min=f["nbytes_min"], nbytes_max=f["nbytes_max"],
        wire_bytes_sum=f["wire_bytes_sum"], num_items=f["num_items"],
        version_min=f["version_min"], version_max=f["version_max"], leaves=f["schema"],
    )


def build(shard: Shard, ev: list[Any], at: Interned) -> None:
    """An `a` event: every hop of one seam, step and transport, folded."""
    shard.seam_steps.append(_seam_step(named(ev, at), shard.pid))


def build_send(shard: Shard, ev: list[Any], at: Interned) -> None:
    """An `X` event: send halves of one seam, step and channel."""
    f = named(ev, at)
    shard.halves.append(SendFold(_seam_step(f, shard.pid), f["channel"]))


def build_receive(shard: Shard, ev: list[Any], at: Interned) -> None:
    """A `Y` event: how many messages an owner took from a channel in a step."""
    f = named(ev, at)
    shard.halves.append(ReceiveFold(
        t_ns=f["t_us"], t_first_ns=f["t_first_us"], pid=shard.pid, owner=f["owner"],
        name=f["name"], transport=f["transport"], channel=f["channel"], step=f["step"],
        count=f["count"], wire_bytes_sum=f["wire_bytes_sum"],
    ))


def build_counter(shard: Shard, ev: list[Any], at: Interned) -> None:
    """A `C` event: one counter's samples in one step."""
    f = named(ev, at)
    shard.counter_folds.append(CounterFold(
        t_ns=f["t_us"], t_first_ns=f["t_first_us"], pid=shard.pid, name=f["name"],
        owner=f["owner"], step=f["step"], count=f["count"], total=float(f["sum"]),
        min=float(f["min"]), max=float(f["max"]), last=float(f["last"]),
    ))


def build_mark(shard: Shard, ev: list[Any], at: Interned) -> None:
    """An `M` event: one marker name's markers in one step."""
    f = named(ev, at)
    shard.mark_folds.append(MarkFold(
        t_ns=f["t_us"], t_first_ns=f["t_first_us"], pid=shard.pid, name=f["name"],
        owner=f["owner"], step=f["step"], count=f["count"],
    ))


def build_drop(shard: Shard, ev: list[Any], at: Interned) -> None:
    """A `D` event: one owner's drops for one reason in one step."""
    f = named(ev, at)
    shard.drop_folds.append(DropFold(
        t_ns=f["t_us"], t_first_ns=f["t_first_us"], pid=shard.pid, owner=f["owner"],
        reason=f["reason"], step=f["step"], count=f["count"], num_items=f["num_items"],
    ))


# Every folded event kind and its builder (each counts as one event of the shard).
BUILDERS: dict[str, Callable[[Shard, list[Any], Interned], None]] = {
    tf.AGGREGATE: build, tf.SEND_FOLD: build_send, tf.RECEIVE_FOLD: build_receive,
    tf.COUNTER_FOLD: build_counter, tf.MARK_FOLD: build_mark, tf.DROP_FOLD: build_drop,
}
