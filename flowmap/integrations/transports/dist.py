"""Hops through torch.distributed: collectives and point-to-point calls, per rank.

The wrapped functions are every data-moving function c10d exports, read from
torch (`dist_ops`), so a renamed or new function (`all_gather_single`) is
covered. Collectives issued from C++ (DDP's Reducer) come from the Flight
Recorder (`flight`), which skips what this wrapper recorded.

Installed when `torch.distributed.distributed_c10d` has run and before
`torch.distributed` star-imports it, so `dist.all_reduce` and a later
`from torch.distributed import all_reduce` are both the wrapped function.
Each rank records what it does, at issue (an async call is recorded when it
returns its handle, not at `wait`):

- a collective is a hop `<rank owner> -> group[<ranks>] : <op>` carrying what
  this rank sends (the input tensors' bytes; for object collectives the
  pickled size that torch measured when it pickled), transport `collective`;
  a rank that only receives (broadcast and scatter off the root) records
  `group[<ranks>] -> <rank owner> : <op>`. One seam per op and group and rank,
  never n² edges.
- `send`/`isend` write a send half, `recv`/`irecv` a receive half, keyed by
  the channel (group, source, destination, tag) and a per-channel sequence
  number; the reader joins them into `<sender owner> -> <receiver owner>`
  (transport `p2p`). An unmatched send still shows, to `rank<peer>`.

The rank owner is the current owner when one was set with a slash
(`trainer/rank0`); `learner` becomes `learner/rank<N>`; the unset default
becomes `rank<N>`, and `init_process_group` makes that the process's default.
Calls made inside another recorded call (`send` calls `isend`, object
collectives call `broadcast`/`all_gather`) are not recorded again.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from flowmap.capture import state, step_hooks, values
from flowmap.capture.api import current_owner, set_process_owner
from flowmap.integrations.transports import dist_ops, flight, record
from flowmap.integrations.transports.flight_entries import ranks_text, recorders
from flowmap.integrations.transports.record import describe

Args = tuple[Any, ...]  # a recorded call's positional arguments
Kwargs = dict[str, Any]  # and its keyword arguments

P2P = ("send", "isend", "recv", "irecv")


class _Calls(threading.local):
    """Per thread: how deep in recorded calls, and the bytes torch pickled in the outermost."""

    depth = 0
    pickled: list[int] | None = None


_tl = _Calls()
_installed = False
_c10d: Any = None
_sequence: dict[str, int] = {}
_labels: dict[int, tuple[Any, str]] = {}  # id(group) -> (weak ref or group, "group[0,1]")
_reader: flight.Reader | None = None
_rank: int | None = None


def install(c10d: Any) -> None:
    """Wrap the data-moving functions of `distributed_c10d` (and `torch.distributed`).

    Which functions those are is read from torch (`dist_ops`), not kept by hand.
    """
    global _installed, _c10d
    if _installed:
        return
    _installed = True
    _c10d = c10d
    wrapped: dict[str, Any] = {}
    for name, op in dist_ops.ops(c10d).items():
        fn = getattr(c10d, name)
        if op.kind == "collective":
            wrapped[name] = _collective(fn, op)
        elif op.kind == "rooted":
            wrapped[name] = _rooted(fn, op)
        elif name in P2P:
            wrapped[name] = _p2p(fn, name)
    wrapped["init_process_group"] = _wrap_init(c10d.init_process_group)
    wrapped["destroy_process_group"] = _wrap_destroy(c10d.destroy_process_group)
    wrapped["_object_to_tensor"] = _count_pickled(c10d._object_to_tensor, sent=True)
    wrapped["_tensor_to_object"] = _count_pickled(c10d._tensor_to_object, sent=False)
    import sys

    package = sys.modules.get("torch.distributed")
    for name, fn in wrapped.items():
        original = getattr(c10d, name)
        setattr(c10d, name, fn)
        # torch.distributed already imported (tracing began late): patch its names too.
        if package is not None and getattr(package, name, None) is original:
            setattr(package, name, fn)


def _arg(args: Args, kwargs: Kwargs, where: tuple[int, str],
         default: Any = None) -> Any:
    i, name = where
    return args[i] if len(args) > i else kwargs.get(name, default)


def _recorded(fn: Callable[..., Any], recorder: Callable[..., None]) -> Callable[..., Any]:
    """`fn` as a recorded call: `recorder(args, kwargs, out, pickled, t_ns)` runs after it."""

    @functools.wraps(fn)
    def flowmap_call(*args: Any, **kwargs: Any) -> Any:
        if state.tracer is None or _tl.depth:
            return fn(*args, **kwargs)
        t_ns = record.now_ns()
        span = _reader.opened() if _reader is not None else None
        try:
            out, pickled = _inside(fn, args, kwargs)
        finally:
            if span is not None:
                span[2] = time.time_ns()  # the Flight Recorder's entries of this call are ours
        try:
            recorder(args, kwargs, out, pickled, t_ns)
        except Exception as exc:
            record.error(exc)
        return out

    return flowmap_call


def _collective(fn: Callable[..., Any], op: dist_ops.Op) -> Callable[..., Any]:
    sent_at, group_at, name = op.sent, op.group, op.name
    assert sent_at is not None

    def record_collective(args: Args, kwargs: Kwargs, out: Any, pickled: list[int],
                          t_ns: int) -> None:
        group = _arg(args, kwargs, group_at)
        if _c10d._rank_not_in_group(group):
            return
        d = describe(_arg(args, kwargs, sent_at))
        nbytes = pickled[0] if op.objects else d.nbytes
        owner, label = rank_owner(), _group_label(group)
        record.hop(owner, label, name, d, nbytes, "collective", t_ns)
        if op.objects:
            _note_pickled(owner, label, name, _arg(args, kwargs, sent_at))

    return _recorded(fn, record_collective)


def _rooted(fn: Callable[..., Any], op: dist_ops.Op) -> Callable[..., Any]:
    sent_at, got_at, group_at, root_at = op.sent, op.got, op.group, op.root
    assert sent_at is not None and got_at is not None and root_at is not None

    def record_rooted(args: Args, kwargs: Kwargs, out: Any, pickled: list[int],
                      t_ns: int) -> None:
        group = _arg(args, kwargs, group_at)
        if _c10d._rank_not_in_group(group):
            return
        src, group_src = _arg(args, kwargs, root_at), kwargs.get("group_src")
        if src is None and group_src is None:
            src = 0 if op.objects else None
        root = (src == _c10d.get_rank()) if src is not None else \
            (group_src == _c10d.get_rank(group))
        label = _group_label(group)
        d = describe(_arg(args, kwargs, sent_at if root else got_at))
        if op.objects:
            nbytes = pickled[0] if root else pickled[1]
        else:
            nbytes = d.nbytes
        src_owner, dst_owner = (rank_owner(), label) if root else (label, rank_owner())
        record.hop(src_owner, dst_owner, op.name, d, nbytes, "collective", t_ns)
        if op.objects and root:
            _note_pickled(src_owner, dst_owner, op.name, _arg(args, kwargs, sent_at))

    return _recorded(fn, record_rooted)


def _note_pickled(src: str, dst: str, name: str, payload: Any) -> None:
    """An object collective pickles what it sends, so a view in it carries its whole storage
    (`flowmap.capture.leaf_notes`; noted as `pickle`, the transport that moves it)."""
    from flowmap.capture import leaf_notes  # here: importing torch arms this module, lean

    found = leaf_notes.collect(payload, "pickle", values.enabled())
    if found:
        record.notes(src, dst, name, "pickle", getattr(state.tracer, "step", None), found)


def _broadcast_coalesced(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`torch.distributed._broadcast_coalesced(group, tensors, buffer_size, src)`: DDP's
    start-up broadcast of its parameters, from Python into C++; recorded here, where the
    root is known, as one `broadcast` of every tensor."""

    def record_coalesced(args: Args, kwargs: Kwargs, out: Any, pickled: list[int],
                         t_ns: int) -> None:
        group = _arg(args, kwargs, (0, "process_group"))
        src = _arg(args, kwargs, (3, "src"), 0)
        label = _group_label(group)
        d = describe(list(_arg(args, kwargs, (1, "tensors"), ())))
        root = src == _c10d.get_rank()
        src_owner, dst_owner = (rank_owner(), label) if root else (label, rank_owner())
        record.hop(src_owner, dst_owner, "broadcast", d, d.nbytes, "collective", t_ns)

    return _recorded(fn, record_coalesced)


def _inside(fn: Callable[..., Any], args: Args, kwargs: Kwargs) -> tuple[Any, list[int]]:
    """Run `fn` as the recorded call: nested calls are not recorded; pickled bytes are counted."""
    outer = getattr(_tl, "pickled", None)
    pickled = _tl.pickled = [0, 0]  # bytes pickled here, bytes unpickled here
    _tl.depth = _tl.depth + 1
    try:
        return fn(*args, **kwargs), pickled
    finally:
        _tl.depth -= 1
        _tl.pickled = outer


def _count_pickled(fn: Callable[..., Any], *, sent: bool) -> Callable[..., Any]:
    """`_object_to_tensor` / `_tensor_to_object`: where torch pickles, read the size it got."""

    @functools.wraps(fn)
    def flowmap_count(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        counts = _tl.pickled
        if counts is not None:
            try:
                if sent:
                    counts[0] += int(out[0].numel())
                else:
                    counts[1] += int(args[1] if len(args) > 1 else kwargs["tensor_size"])
            except Exception as exc:
                record.error(exc)
        return out

    return flowmap_count


def _p2p(fn: Callable[..., Any], op: str) -> Callable[..., Any]:
    sending = op in ("send", "isend")

    def record_p2p(args: Args, kwargs: Kwargs, out: Any, pickled: list[int], t_ns: int) -> None:
        _record_p2p(op, sending, args, kwargs, out, t_ns)

    return _recorded(fn, record_p2p)


def _record_p2p(op: str, sending: bool, args: Args, kwargs: Kwargs, out: Any, t_ns: int) -> None:
    tensor = _arg(args, kwargs, (0, "tensor"))
    group = _arg(args, kwargs, (2, "group"))
    tag = _arg(args, kwargs, (3, "tag"), 0) or 0
    if _c10d._rank_not_in_group(group) or (op == "recv" and out == -1) or \
            (op in ("isend", "irecv") and out is None):
        return
    peer = _arg(args, kwargs, (1, "dst" if sending else "src"))
    group_peer = kwargs.get("group_dst" if sending else "group_src")
    if peer is None and group_peer is not None:
        peer = _c10d.get_global_rank(_c10d._group_or_default_group(group), group_peer)
    if peer is None and op == "recv":
        peer = out  # a receive from any source returns the sender
    if peer is None:
        return  # irecv from any source: the sender is known only at wait
    me = _c10d.get_rank()
    src, dst = (me, peer) if sending else (peer, me)
    channel = f"dist:{_group_label(group)}:{src}>{dst}:{tag}"
    seq = _sequence[channel] = _sequence.get(channel, -1) + 1
    d = describe(tensor)
    owner = rank_owner()
    if sending:
        record.send_half(owner, _peer_owner(owner, me, peer), op, d, d.nbytes, "p2p", channel,
                         str(seq), d.nbytes, t_ns)
    else:
        record.receive_half(owner, op, "p2p", channel, str(seq), d.nbytes, t_ns)


def _wrap_init(init: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(init)
    def flowmap_init_process_group(*args: Any, **kwargs: Any) -> Any:
        global _rank
        out = init(*args, **kwargs)
        try:
            _rank = _c10d.get_rank()
            if state.default_owner == "main" or state.auto_owner:
                set_process_owner(f"rank{_c10d.get_rank()}")
            _wrap_package_extras()
            _start_reader()
        except Exception as exc:
            record.error(exc)
        return out

    return flowmap_init_process_group


def _wrap_destroy(destroy: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(destroy)
    def flowmap_destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        if _reader is not None and state.tracer is not None:
            _reader.read()  # while the groups still exist to be named
        return destroy(*args, **kwargs)

    return flowmap_destroy_process_group


def _wrap_package_extras() -> None:
    """`torch.distributed._broadcast_coalesced`, looked up by DDP at each call."""
    import sys

    package = sys.modules.get("torch.distributed")
    fn = getattr(package, "_broadcast_coalesced", None)
    if fn is not None and not getattr(fn, "_flowmap", False):
        wrapped = _broadcast_coalesced(fn)
        wrapped._flowmap = True  # type: ignore[attr-defined]
        package._broadcast_coalesced = wrapped  # type: ignore[union-attr]


def _start_reader() -> None:
    """Read the Flight Recorder from now on: the collectives issued from C++."""
    global _reader
    if _reader is not None or not flight.enabled() or flight.ring_size() == 0:
        return  # off, or torch's recorder is (TORCH_FR_BUFFER_SIZE=0)
    dumps = recorders()
    if not dumps:
        return
    reader = flight.Reader(_c10d, _process_owner, dumps)
    reader.remember_groups()
    step_hooks.hooks.append(reader.step_moved)
    _reader = reader
    reader.start()


def _process_owner() -> str:
    """The rank owner of the process (the reader's thread has no owner block of its own)."""
    owner = state.default_owner
    rank = _rank
    if rank is None:
        rank = _c10d.get_rank()
    if owner == "main":
        return f"rank{rank}"
    if "/" in owner or owner == f"rank{rank}":
        return owner
    return f"{owner}/rank{rank}"


# -- names ------------------------------------------------------------------------
def rank_owner() -> str:
    """This rank's owner: the current owner, made to say which rank it is."""
    rank = _c10d.get_rank()
    owner = current_owner()
    if owner == "main":
        return f"rank{rank}"
    if "/" in owner or owner == f"rank{rank}":
        return owner
    return f"{owner}/rank{rank}"


def _peer_owner(owner: str, me: int, peer: int) -> str:
    """The peer's owner by analogy with ours (`trainer/rank0` -> `trainer/rank1`)."""
    mine = f"rank{me}"
    if owner.endswith(mine):
        return owner[: -len(mine)] + f"rank{peer}"
    return f"rank{peer}"


def _group_label(group: Any) -> str:
    """`group[0,1]`, `group[0-7]`: the group's global ranks, cached per group object."""
    g = group if group is not None else _c10d._get_default_group()
    cached = _labels.get(id(g))
    if cached is not None:
        ref, label = cached
        if (ref() if isinstance(ref, weakref.ref) else ref) is g:
            return label
    label = "group[" + ranks_text(_c10d.get_process_group_ranks(g)) + "]"
    try:
        ref_or_none: Any = weakref.ref(g)
    except TypeError:
        return label  # not weakly referenceable: computed each time, never held
    if len(_labels) > 1000:
        _labels.clear()
    _labels[id(g)] = (ref_or_none, label)
    return label
