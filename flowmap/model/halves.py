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
   one more hop from the same sender;
4. a send half still unclaimed is a hop to its fallback destination (the
   receiver was not traced); a receive half with no sender is a hop from
   `(untraced)` carrying the bytes it got.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flowmap import trace_format as tf

if TYPE_CHECKING:
    from flowmap.model.reader import Hop, Leaf, Shard

UNTRACED = "(untraced)"
# Channels whose keys are sequence numbers: matched on the exact channel only.
SEQUENCED = ("dist",)


@dataclass(slots=True)
class SendHalf:
    """The sender's hop, its `dst` being where it goes if no receive half joins it."""

    hop: Hop
    channel: str
    key: str

    @property
    def t_ns(self) -> int:
        return self.hop.t_ns


@dataclass(slots=True)
class ReceiveHalf:
    t_ns: int
    pid: int
    owner: str
    name: str
    transport: str
    channel: str
    key: str
    wire_bytes: int | None


def decode(ev: list[Any], t_ns: int, pid: int, s: Callable[[int], str],
           schemas: dict[int, tuple[Leaf, ...]]) -> SendHalf | ReceiveHalf:
    """One `x` or `y` event of a shard (`s` resolves interned strings)."""
    if ev[0] == tf.SEND_HALF:
        from flowmap.model.reader import Hop

        hop = Hop(t_ns, pid, s(ev[2]), s(ev[3]), s(ev[4]), int(ev[6]), schemas[ev[5]],
                  tuple(ev[7]), ev[8], ev[9], s(ev[10]), tuple(ev[11]) if ev[11] else (),
                  ev[14])
        return SendHalf(hop, s(ev[12]), str(ev[13]))
    return ReceiveHalf(t_ns, pid, s(ev[2]), s(ev[3]), s(ev[4]), s(ev[5]), str(ev[6]), ev[7])


def join(shards: list[Shard]) -> list[Hop]:
    """Every half of every shard, as hops (unsorted)."""
    sends = [h for sh in shards for h in sh.halves if isinstance(h, SendHalf)]
    receives = [h for sh in shards for h in sh.halves if isinstance(h, ReceiveHalf)]
    if not sends and not receives:
        return []
    sends.sort(key=lambda h: h.t_ns)
    receives.sort(key=lambda h: h.t_ns)
    out: list[Hop] = []
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
            out.append(_hop(s, r.owner))
        else:
            left.append(r)
    # 2. a side that names no single channel (`zmq`, `mp`): the key within the family
    unclaimed = sorted((s for q in exact.values() for s in q), key=lambda h: h.t_ns)
    any_channel: dict[tuple[str, str], deque[SendHalf]] = defaultdict(deque)
    unnamed: dict[tuple[str, str], deque[SendHalf]] = defaultdict(deque)
    for s in unclaimed:
        if _digest_keyed(s):
            any_channel[(_family(s), s.key)].append(s)
            if s.channel == _family(s):
                unnamed[(_family(s), s.key)].append(s)
    taken: set[int] = set()
    still: list[ReceiveHalf] = []
    for r in left:
        table = any_channel if r.channel == _family(r) else unnamed
        queue = table.get((_family(r), r.key)) if _digest_keyed(r) else None
        while queue and id(queue[0]) in taken:
            queue.popleft()
        if queue:
            s = queue.popleft()
            taken.add(id(s))
            claimed[(r.channel, r.key)] = s
            out.append(_hop(s, r.owner))
        else:
            still.append(r)
    # 3. a message already claimed reached one more receiver (fan-out); else no sender
    for r in still:
        sender = claimed.get((r.channel, r.key))
        out.append(_hop(sender, r.owner) if sender is not None else _untraced_sender(r))
    # 4. sends nobody traced received
    out.extend(s.hop for s in unclaimed if id(s) not in taken)
    return out


def _family(h: Any) -> str:
    return str(h.channel.split(":", 1)[0])


def _digest_keyed(h: Any) -> bool:
    return _family(h) not in SEQUENCED


def _hop(s: SendHalf, dst: str) -> Hop:
    return s.hop if s.hop.dst == dst else dataclasses.replace(s.hop, dst=dst)


def _untraced_sender(r: ReceiveHalf) -> Hop:
    from flowmap.model.reader import Hop

    nbytes = r.wire_bytes or 0
    return Hop(r.t_ns, r.pid, UNTRACED, r.owner, r.name, nbytes, (), (), None, None,
               r.transport, (), r.wire_bytes)
