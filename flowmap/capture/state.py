"""Process-wide capture state: the one flag every public call checks first.

Kept in a module of its own so the hot path is a single attribute load
(`state.tracer is None` means "not tracing", and every API call returns).
"""

from __future__ import annotations

from _thread import get_ident
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowmap.capture import owner_context

if TYPE_CHECKING:
    from flowmap.capture.tracer import Tracer
    from flowmap.writer.encoder import TraceWriter

tracer: Tracer | None = None

# The owner of the code that is running (`owner_context`): threads and asyncio tasks each
# keep their own; `default_owner` covers threads that never set one.
current_owner = owner_context.current_owner
default_owner: str = "main"
# True while `default_owner` is one flowmap chose for a multiprocessing child (its target's
# name): `init_process_group` may still make it `rank<N>`; `set_owner` makes it False.
auto_owner: bool = False

# Called once, at the program's first use of the capture API other than `hop` (an owner, a
# seam, a step...): the program is instrumented, so `flowmap trace` with no map stops looking
# for seams of its own (flowmap/discover/auto.py). None when nobody is watching.
on_declared: Callable[[], None] | None = None


def declared() -> None:
    """The program used the capture API: tell the watch, once."""
    global on_declared
    hook, on_declared = on_declared, None
    if hook is not None:
        try:
            hook()
        except Exception:  # never into the user's program
            pass


# Each thread's last `flowmap.hop` payload: a program that records a hand-off itself and
# then puts the same object on a queue has told that hop already
# (flowmap/integrations/transports/thread_queue.py records queue hops, not twice), once.
# Its id alone would match the next dict built at the freed one's address; the owner it
# was recorded under, its type and size, and the step must match too (a put in another
# stage's block, or in a later step, is another hand-off, whatever it carries).
last_hop: dict[int, tuple[int, str | None, type, int, Any]] = {}


def _mark(payload: object) -> tuple[int, str | None, type, int, Any]:
    t = type(payload)
    sized = t is dict or t is list or t is tuple  # no code of the program's runs
    step = getattr(tracer, "step", None)
    return (id(payload), current_owner.get(), t,
            len(payload) if sized else -1, step)  # type: ignore[arg-type]


def hopped(payload: object) -> None:
    """Note `payload` as this thread's last recorded hop."""
    if len(last_hop) >= 1024:
        last_hop.clear()  # threads come and go: only the latest matter
    last_hop[get_ident()] = _mark(payload)


def hopped_last(payload: object) -> bool:
    """Whether `payload` is the one this thread last recorded with `flowmap.hop`, under the
    owner running now, in this step, and no put has been matched to that hop yet."""
    me = get_ident()
    mark = last_hop.get(me)
    if mark is None or mark[0] != id(payload) or mark != _mark(payload):
        return False
    del last_hop[me]  # one put is that hop; another is a hand-off of its own
    return True


def owner_runs(name: str | None) -> Any:
    """`name`'s code starts (an owner block, a seam's body): it is running until `owner_ran`.
    Returns what to give `owner_ran` (None when nothing is traced). Never raises."""
    t = tracer
    if t is not None and type(name) is str:
        try:
            return _writer_of(t).owner_runs(name)
        except Exception:  # a forked child's stand-in (`_writer_of`), or a failure of ours
            pass
    return None


def owner_ran(name: str | None, started: Any) -> None:
    """`name`'s code ran since `owner_runs` returned `started`: an owner block or a seam's
    body ended. A storage written in place since its last hop was most likely written by
    a stage that ran, or by the one whose block was seen to write it
    (`flowmap.writer.storage_table`). Never raises."""
    t = tracer
    if t is not None and type(name) is str and started is not None:
        try:
            _writer_of(t).owner_ran(name, started)
        except Exception:
            pass


def owner_made(name: str, value: Any) -> None:
    """`name`'s decorated function returned `value` (or its generator yielded it): tensors
    no hop carried yet are that stage's making (`BlockWrites.made`). Never raises."""
    t = tracer
    if t is None or value is None:
        return
    try:
        from flowmap.capture import describe_lazy  # the describers: loaded at the first use

        d = describe_lazy.describe(value, None)
        if d.storages:
            w = _writer_of(t)
            with w.lock:
                if not t.closed:
                    w.writes.made(w.versions, name, list(d.storages), list(d.holders))
    except Exception:  # a forked child's stand-in, a value of no tensor: nothing said
        pass


def _writer_of(t: Tracer) -> TraceWriter:
    """The tracer's writer; a KeyError for a forked child's stand-in, which an owner block
    must not open (its shard opens at the child's first event)."""
    writer: TraceWriter = vars(t)["writer"]
    return writer
