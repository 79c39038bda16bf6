"""Join the send and receive halves of transport hops into hops.

A queue's producer cannot know which process will `get` its message, nor a
socket's sender who is on the other end; capture therefore writes one half on
each side (see `flowmap.integrations.transports.record`), keyed by the
channel and a digest of the bytes that crossed, and the two are put together
here, after every shard is read:

1. a receive half takes the earliest unclaimed send half with the same
   channel and key (messages on one channel arrive in the order sent);
2. where one side names no single channel (a socket bound to two
   endpoints is `zmq`), left-over halves keyed by digests (not sequence
   numbers) are matched by key within the channel's family (`mp`, `zmq`);
3. a receive half whose message was already claimed is a fan-out (PUB/SUB):
   one more hop from the same sender (claimed on its channel, or by key within
   the family when the sender was on several endpoints);
4. a send half still unclaimed is a hop to its fallback destination (the
   receiver was not traced); a receive half with no sender is a hop from
   `(untraced)` carrying the bytes it got.

Under `trace --aggregate` a process past its detail window folds its halves
(events `X` and `Y`): the sender's per seam, step and channel, the
receiver's as a count per owner and channel. Message keys are gone then, so
on a channel that has folded halves, what steps 1 to 3 left over is joined
by count (`_by_count`): each owner that received from the channel takes its
share of every send record, its count over the count sent. A channel read
by one owner (a result queue, a pipe to one worker, a p2p pair) gets every
send whole, so its figures are exactly a full trace's; a queue shared by
several consumers gets each sender's seam-steps shared out by count, hop
counts exact per owner, bytes apportioned. Sends beyond what was received
go to their fallback; receipts beyond what was sent come from `(untraced)`.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flowmap import trace_format as tf
from flowmap.read.events import (
    Half,
    Hop,
    Leaf,
    ReceiveFold,
    ReceiveHalf,
    SeamStep,
    SendFold,
    SendHalf,
    Shard,
)
from flowmap.trace_format import UNTRACED as UNTRACED  # re-exported: where halves are joined

# Channels whose keys are sequence numbers: matched on the exact channel only.
SEQUENCED = ("dist",)


def decode(ev: list[Any], t_ns: int, pid: int, s: Callable[[int], str],
           schemas: dict[int, tuple[Leaf, ...]]) -> SendHalf | ReceiveHalf:
    """One `x` or `y` event of a shard (`s` resolves interned strings)."""
    if ev[0] == tf.SEND_HALF:
        key = str(ev[13])
        hop = Hop(t_ns, pid, s(ev[2]), s(ev[3]), s(ev[4]), int(ev[6]), schemas[ev[5]],
                  tuple(ev[7]), ev[8], ev[9], s(ev[10]), tuple(ev[11]) if ev[11] else (),
                  ev[14], key=key)
        return SendHalf(hop, s(ev[12]), key)
    return ReceiveHalf(t_ns, pid, s(ev[2]), s(ev[3]), s(ev[4]), s(ev[5]), str(ev[6]), ev[7],
                       tuple(ev[8]) if len(ev) > 8 else (), schemas[ev[9]] if len(ev) > 9 else (),
                       tuple(ev[10]) if len(ev) > 10 else ())


@dataclass(slots=True)
class Joined:
    """What the halves of a run make: hops, and seam-steps where halves were folded."""

    hops: list[Hop]
    seam_steps: list[SeamStep]
    shared: list[str]  # channels several owners read, whose folded sends were shared out


def join(shards: list[Shard]) -> list[Hop]:
    """Every half of every shard, as hops (unsorted); folded halves are left out (see
    `join_run`)."""
    return join_run(shards).hops


def join_run(shards: list[Shard]) -> Joined:
    """Every half of every shard, as hops and, where halves were folded, seam-steps."""
    return join_halves([h for sh in shards for h in sh.halves])


def join_halves(halves: Sequence[Half]) -> Joined:
    """`halves` (of any shards) joined, as hops and, where halves were folded, seam-steps."""
    sends = [h for h in halves if isinstance(h, SendHalf)]
    receives = [h for h in halves if isinstance(h, ReceiveHalf)]
    send_folds = [h for h in halves if isinstance(h, SendFold)]
    receive_folds = [h for h in halves if isinstance(h, ReceiveFold)]
    if not sends and not receives and not send_folds and not receive_folds:
        return Joined([], [], [])
    sends.sort(key=lambda h: h.t_ns)
    receives.sort(key=lambda h: h.t_ns)
    p = pair(sends, receives)
    out = [joined_hop(s, r.owner, r) for s, r in p.pairs]
    claimed, unclaimed, taken, still = p.claimed, p.unclaimed, p.taken, p.unpaired
    # 3. a message already claimed reached one more receiver (fan-out)
    unsent: list[ReceiveHalf] = []
    for r in still:
        sender = claimed_sender(claimed, r)
        if sender is not None:
            out.append(joined_hop(sender, r.owner, r))
        else:
            unsent.append(r)
    # folded halves: what is left on their channels is joined by count
    folded_steps: list[SeamStep] = []
    shared: list[str] = []
    pooled = {f.channel for f in send_folds} | {f.channel for f in receive_folds}
    if pooled:
        # a folded side that names no single channel (a socket on two endpoints: `zmq`)
        # pools every channel of its family
        bare = {c for c in pooled if c == _family_name(c) and c not in SEQUENCED}
        pooled |= {s.channel for s in unclaimed if family(s) in bare}
        pooled |= {r.channel for r in unsent if family(r) in bare}
        pool_sends = [s for s in unclaimed if id(s) not in taken and s.channel in pooled]
        taken.update(id(s) for s in pool_sends)
        pool_receives = [r for r in unsent if r.channel in pooled]
        unsent = [r for r in unsent if r.channel not in pooled]
        hops, folded_steps, shared = _by_count(pool_sends, send_folds, pool_receives,
                                               receive_folds)
        out += hops
    # a receive half no traced sender sent
    out.extend(_untraced_sender(r) for r in unsent)
    # 4. sends nobody traced received
    out.extend(s.hop for s in unclaimed if id(s) not in taken)
    return Joined(out, folded_steps, shared)


@dataclass(slots=True)
class Pairs:
    """What the first two rules make of sends and receives: the messages received."""

    pairs: list[tuple[SendHalf, ReceiveHalf]]
    unpaired: list[ReceiveHalf]  # receives of no send, oldest first
    unclaimed: list[SendHalf]  # sends the first rule left, oldest first (the second took `taken`)
    taken: set[int]  # ids of the sends the second rule took
    claimed: dict[tuple[str, str], SendHalf]  # (channel or family, key) -> the send it went to


def pair(sends: Sequence[SendHalf], receives: Sequence[ReceiveHalf]) -> Pairs:
    """Rules 1 and 2 over `sends` and `receives` (each sorted by time): the run's join, and a
    live watch's as the halves of each message are read (`flowmap.read.settle`)."""
    pairs: list[tuple[SendHalf, ReceiveHalf]] = []
    # 1. the same channel and key, in send order
    exact: dict[tuple[str, str], deque[SendHalf]] = defaultdict(deque)
    for s in sends:
        exact[(s.channel, s.key)].append(s)
    claimed: dict[tuple[str, str], SendHalf] = {}
    left: list[ReceiveHalf] = []
    for r in receives:
        queue = exact.get((r.channel, r.key))
        if queue:
            s = claimed[(r.channel, r.key)] = queue.popleft()
            pairs.append((s, r))
        else:
            left.append(r)
    # 2. a side that names no single channel (`zmq`, `mp`): the key within the family
    unclaimed = sorted((s for q in exact.values() for s in q), key=lambda h: h.t_ns)
    any_channel: dict[tuple[str, str], deque[SendHalf]] = defaultdict(deque)
    unnamed: dict[tuple[str, str], deque[SendHalf]] = defaultdict(deque)
    if left:
        for s in unclaimed:
            if digest_keyed(s):
                any_channel[(family(s), s.key)].append(s)
                if s.channel == family(s):
                    unnamed[(family(s), s.key)].append(s)
    taken: set[int] = set()
    still: list[ReceiveHalf] = []
    for r in left:
        table = any_channel if r.channel == family(r) else unnamed
        queue = table.get((family(r), r.key)) if digest_keyed(r) else None
        while queue and id(queue[0]) in taken:
            queue.popleft()
        if queue:
            s = queue.popleft()
            taken.add(id(s))
            claimed[(r.channel, r.key)] = claimed[(family(r), r.key)] = s
            pairs.append((s, r))
        else:
            still.append(r)
    return Pairs(pairs, still, unclaimed, taken, claimed)


@dataclass(slots=True)
class _Receiver:
    """What one owner took from one channel: full receive halves and folded counts."""

    count: int = 0
    wire: int | None = None
    first: ReceiveHalf | ReceiveFold | None = None  # for the name and transport of an untraced hop


def _by_count(sends: list[SendHalf], send_folds: list[SendFold], receives: list[ReceiveHalf],
              receive_folds: list[ReceiveFold]) -> tuple[list[Hop], list[SeamStep], list[str]]:
    """Join left-over halves of channels with folded halves, per channel, by count; also
    the channels whose sends were shared out among several owners."""
    records: dict[str, list[SendHalf | SendFold]] = defaultdict(list)
    for s in sends:
        records[s.channel].append(s)
    for f in send_folds:
        records[f.channel].append(f)
    takers: dict[str, dict[str, _Receiver]] = defaultdict(dict)
    taken_by: list[ReceiveHalf | ReceiveFold] = [*receives, *receive_folds]
    for r in taken_by:
        one = (_Receiver(1, r.wire_bytes, r) if isinstance(r, ReceiveHalf)
               else _Receiver(r.count, r.wire_bytes_sum, r))
        _add_receiver(takers[r.channel].setdefault(r.owner, _Receiver()), one)
    _pool_families(records, takers)
    hops: list[Hop] = []
    steps: list[SeamStep] = []
    shared: list[str] = []
    for channel in sorted(records.keys() | takers.keys()):
        sent = sorted(records.get(channel, ()), key=_first_ns)
        total = sum(1 if isinstance(s, SendHalf) else s.seam_step.hops for s in sent)
        owners = sorted(takers.get(channel, {}).items())
        # each owner's share of every send record: its count over the count sent
        shares = [(owner, min(1.0, got.count / total) if total else 0.0) for owner, got in owners]
        # owners that together took no more than was sent share it out (a work queue);
        # more than that, and each took its own copy (PUB/SUB fan-out)
        partition = sum(share for _, share in shares) <= 1.0 + 1e-9
        if partition and len(owners) > 1 and total:
            shared.append(channel)
        given = dict.fromkeys((o for o, _ in owners), 0)
        done = 0  # hops of the records before this one
        for rec in sent:
            n = 1 if isinstance(rec, SendHalf) else rec.seam_step.hops
            left = n
            for owner, share in shares:
                # cumulative rounding: each owner's total is its exact share of all sent
                k = min(n, round(share * (done + n)) - given[owner])
                if partition:
                    k = min(left, k)
                if k > 0:
                    given[owner] += k
                    # shared out: the next k of the record; fanned out: a copy of them all
                    _give(rec, owner, n - left if partition else 0, k, hops, steps)
                    if partition:
                        left -= k
            if partition and left > 0:  # received by nobody traced: to the fallback
                _give(rec, None, n - left, left, hops, steps)
            done += n
        for owner, got in owners:  # receipts beyond what was sent: from an untraced sender
            extra = got.count - min(got.count, total)
            if extra and got.first is not None:
                _untraced(got.first, got, owner, extra, hops, steps)
    return hops, steps, shared


def _pool_families(records: dict[str, list[SendHalf | SendFold]],
                   takers: dict[str, dict[str, _Receiver]]) -> None:
    """Put a side that names only its family (`zmq`: a socket bound or connected to
    several endpoints) together with the channels of that family that lack that side,
    so that its messages are shared or fanned out among all of their readers."""
    for bare in sorted(c for c in records.keys() | takers.keys()
                       if c == _family_name(c) and c not in SEQUENCED):
        if bare in records and bare not in takers:
            for c in [c for c in takers if c != bare and _family_name(c) == bare
                      and c not in records]:
                into = takers[bare]
                for owner, got in takers.pop(c).items():
                    _add_receiver(into.setdefault(owner, _Receiver()), got)
        elif bare in takers and bare not in records:
            for c in [c for c in records if c != bare and _family_name(c) == bare
                      and c not in takers]:
                records[bare] += records.pop(c)
                records[bare].sort(key=_first_ns)


def _add_receiver(into: _Receiver, got: _Receiver) -> None:
    into.count += got.count
    if got.wire is not None:
        into.wire = got.wire + (into.wire or 0)
    if into.first is None or (got.first is not None and got.first.t_ns < into.first.t_ns):
        into.first = got.first


def _family_name(channel: str) -> str:
    return channel.split(":", 1)[0]


def _first_ns(rec: SendHalf | SendFold) -> int:
    return rec.t_ns if isinstance(rec, SendHalf) else rec.seam_step.t_first_ns


def _give(rec: SendHalf | SendFold, owner: str | None, start: int, k: int, hops: list[Hop],
          steps: list[SeamStep]) -> None:
    """Hops `start` to `start + k` of `rec` go to `owner` (None: the fallback destination).

    A fold's sums are cut at the same places, so its parts add up to it exactly.
    """
    if isinstance(rec, SendHalf):
        hops.append(rec.hop if owner is None else joined_hop(rec, owner))
        return
    st = rec.seam_step
    dst = st.dst if owner is None else owner
    n = st.hops
    if k == n:
        steps.append(st if dst == st.dst else dataclasses.replace(st, dst=dst))
        return

    def part(total: int) -> int:
        return total * (start + k) // n - total * start // n

    steps.append(dataclasses.replace(
        st, dst=dst, hops=k, nbytes_sum=part(st.nbytes_sum),
        wire_bytes_sum=None if st.wire_bytes_sum is None else part(st.wire_bytes_sum),
        num_items=part(st.num_items),
    ))


def _untraced(r: ReceiveHalf | ReceiveFold, got: _Receiver, owner: str, extra: int,
              hops: list[Hop], steps: list[SeamStep]) -> None:
    """`extra` receipts of `owner` (`r` the first) that no traced sender sent: from
    `(untraced)`, at the mean size of what the owner got."""
    if isinstance(r, ReceiveHalf) and extra == 1 and got.count == 1:
        hops.append(_untraced_sender(r))
        return
    mean = (got.wire or 0) // got.count
    steps.append(SeamStep(
        t_ns=r.t_ns, t_first_ns=r.t_ns if isinstance(r, ReceiveHalf) else r.t_first_ns,
        pid=r.pid, src=UNTRACED, dst=owner, name=r.name,
        step=None if isinstance(r, ReceiveHalf) else r.step, transport=r.transport, hops=extra,
        nbytes_sum=mean * extra, nbytes_min=mean, nbytes_max=mean,
        wire_bytes_sum=None if got.wire is None else mean * extra, num_items=0,
        version_min=None, version_max=None, leaves=(),
    ))


def family(h: Any) -> str:
    return _family_name(h.channel)


def digest_keyed(h: Any) -> bool:
    return family(h) not in SEQUENCED


def claimed_sender(claimed: dict[tuple[str, str], SendHalf], r: ReceiveHalf) -> SendHalf | None:
    """The send of `r`'s message in `claimed`: on its channel, or (a socket on several
    endpoints fanned out) by its key within its family."""
    s = claimed.get((r.channel, r.key))
    return s if s is not None or not digest_keyed(r) else claimed.get((family(r), r.key))


def joined_hop(s: SendHalf, dst: str, r: ReceiveHalf | None = None) -> Hop:
    """The hop of a send half received by `dst` (`r`, whose storages say what it unpickled,
    and whose leaves stand for a sender's raw frames)."""
    h = s.hop
    arrived = (r.pid, r.storages) if r is not None and (r.storages or r.texts) else None
    if h.dst == dst and r is None:
        return h
    leaves = h.leaves  # raw frames say only their lengths: what the receiver loaded says more
    if r is not None and r.leaves and all(leaf.kind == "bytes" for leaf in leaves):
        leaves = r.leaves
    return Hop(h.t_ns, h.pid, h.src, dst, h.name, h.nbytes, leaves, h.storages, h.step,
               h.version, h.transport, h.items, h.wire_bytes, arrived,
               None if r is None else r.t_ns, h.texts,
               () if r is None else r.texts, h.key, h.windows)  # (`replace`: 10x this)


def _untraced_sender(r: ReceiveHalf) -> Hop:
    nbytes = r.wire_bytes or 0
    return Hop(r.t_ns, r.pid, UNTRACED, r.owner, r.name, nbytes, (), (), None, None,
               r.transport, (), r.wire_bytes)
