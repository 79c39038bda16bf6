"""Build the records of folded events: what a process folded under `trace --aggregate`.

Kept out of `reader` so that the per-event decoding there stays about hops;
the event's fields are checked against the format before these run, and read
here by name and type (`flowmap.read.fields`).
"""

from __future__ import annotations

from collections.abc import Callable

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
from flowmap.read.fields import Fields


def _seam_step(f: Fields, pid: int) -> SeamStep:
    """The `SeamStep` of an `a` or `X` event (the fields they share)."""
    return SeamStep(
        t_ns=f.time_ns("t_us"), t_first_ns=f.time_ns("t_first_us"), pid=pid, src=f.text("src"),
        dst=f.text("dst"), name=f.text("name"), step=f.opt_int("step"),
        transport=f.text("transport"), hops=f.count("hops"), nbytes_sum=f.count("nbytes_sum"),
        nbytes_min=f.count("nbytes_min"), nbytes_max=f.count("nbytes_max"),
        wire_bytes_sum=f.opt_int("wire_bytes_sum"), num_items=f.count("num_items"),
        version_min=f.opt_int("version_min"), version_max=f.opt_int("version_max"),
        leaves=f.leaves("schema"),
    )


def build(shard: Shard, f: Fields) -> None:
    """An `a` event: every hop of one seam, step and transport, folded."""
    shard.seam_steps.append(_seam_step(f, shard.pid))


def build_send(shard: Shard, f: Fields) -> None:
    """An `X` event: send halves of one seam, step and channel."""
    shard.halves.append(SendFold(_seam_step(f, shard.pid), f.text("channel")))


def build_receive(shard: Shard, f: Fields) -> None:
    """A `Y` event: how many messages an owner took from a channel in a step."""
    shard.halves.append(ReceiveFold(
        t_ns=f.time_ns("t_us"), t_first_ns=f.time_ns("t_first_us"), pid=shard.pid,
        owner=f.text("owner"), name=f.text("name"), transport=f.text("transport"),
        channel=f.text("channel"), step=f.opt_int("step"), count=f.count("count"),
        wire_bytes_sum=f.opt_int("wire_bytes_sum"),
    ))


def _named(shard: Shard, f: Fields) -> tuple[int, int, int, str, str, int | None, int]:
    """The fields a counter's and a marker's folds share, in their order."""
    return (f.time_ns("t_us"), f.time_ns("t_first_us"), shard.pid, f.text("name"),
            f.text("owner"), f.opt_int("step"), f.count("count"))


def build_counter(shard: Shard, f: Fields) -> None:
    """A `C` event: one counter's samples in one step."""
    shard.counter_folds.append(CounterFold(*_named(shard, f), total=f.number("sum"),
                                           min=f.number("min"), max=f.number("max"),
                                           last=f.number("last")))


def build_mark(shard: Shard, f: Fields) -> None:
    """An `M` event: one marker name's markers in one step."""
    shard.mark_folds.append(MarkFold(*_named(shard, f)))


def build_drop(shard: Shard, f: Fields) -> None:
    """A `D` event: one owner's drops for one reason in one step."""
    shard.drop_folds.append(DropFold(
        t_ns=f.time_ns("t_us"), t_first_ns=f.time_ns("t_first_us"), pid=shard.pid,
        owner=f.text("owner"), reason=f.text("reason"), step=f.opt_int("step"),
        count=f.count("count"), num_items=f.count("num_items"),
    ))


# Every folded event kind and its builder (each counts as one event of the shard).
BUILDERS: dict[str, Callable[[Shard, Fields], None]] = {
    tf.AGGREGATE: build, tf.SEND_FOLD: build_send, tf.RECEIVE_FOLD: build_receive,
    tf.COUNTER_FOLD: build_counter, tf.MARK_FOLD: build_mark, tf.DROP_FOLD: build_drop,
}
