"""Join the send and receive halves of transport hops into hops.

A queue's producer cannot know which process will `get` its message, nor a
socket's sender who is on the other end; capture therefore writes one half on
each side (see `flowmap.integrations.transports.record`), keyed by the
channel and a digest of the bytes that crossed, and the two are put together
here, after every shard is read:

1. a receive half takes the earliest unclaimed send half with the same
   channel and key (messages on one channel arrive in the order sent);
2. left-over halves whose keys are digests (not sequence numbers) are then
   matched by key within the channel's family (`mp`, `zmq`) — a socket bound
   to two endpoints names no single channel;
3. a receive half whose message was already claimed is a fan-out (PUB/SUB):
   one more hop from the same sender;
4. a send half still unclaimed is a hop to its fallback destination (the
   receiver was not traced); a receive half with no sender is a hop from
   `(untraced)` carrying the bytes it got.
"""

from __future__ import annotations

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
    t_ns: int
    pid: int
    src: str
    fallback: str
    name: str
    nbytes: int
    leaves: tuple[Leaf, ...]
    storages: tuple[int, ...]
    step: int | None
    version: int | None
    transport: str
    items: tuple[Any, ...]
    channel: str
    key: str
    wire_bytes: int | None


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
        return SendHalf(t_ns, pid, s(ev[2]), s(ev[3]), s(ev[4]), int(ev[6]), schemas[ev[5]],
                        tuple(ev[7]), ev[8], ev[9], s(ev[10]), tuple(ev[11]) if ev[11] else (),
                        s(ev[12]), str(ev[13]), ev[14])
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
    claimed: dict[tuple[str, str], SendHalf] = {}

    def by(key: Callable[[Any], tuple[str, str]], halves: list[SendHalf]) -> dict:
        table: dict[tuple[str, str], deque[SendHalf]] = defaultdict(deque)
        for h in halves:
            table[key(h)].append(h)
        return table

    def exact(h: Any) -> tuple[str, str]:
        return (h.channel, h.key)

    def family(h: Any) -> tuple[str, str]:
        return (h.channel.split(":", 1)[0], h.key)

    left: list[ReceiveHalf] = receives
    for key, eligible in ((exact, lambda h: True), (family, _digest_keyed)):
        table = by(key, [h for h in sends if eligible(h)])
        unmatched: list[ReceiveHalf] = []
        for r in left:
            queue = table.get(key(r)) if eligible(r) else None
            if queue:
                s = queue.popleft()
                claimed[exact(r)] = claimed[family(r)] = s
                out.append(_hop(s, r.owner))
            else:
                unmatched.append(r)
        left = unmatched
        sends = [h for q in table.values() for h in q] + [h for h in sends if not eligible(h)]
        sends.sort(key=lambda h: h.t_ns)
    for r in left:
        s = claimed.get(exact(r)) or (claimed.get(family(r)) if _digest_keyed(r) else None)
        out.append(_hop(s, r.owner) if s is not None else _untraced_sender(r))
    out.extend(_hop(s, s.fallback) for s in sends)
    return out


def _digest_keyed(h: Any) -> bool:
    return h.channel.split(":", 1)[0] not in SEQUENCED


def _hop(s: SendHalf, dst: str) -> Hop:
    from flowmap.model.reader import Hop

    return Hop(s.t_ns, s.pid, s.src, dst, s.name, s.nbytes, s.leaves, s.storages, s.step,
               s.version, s.transport, s.items, s.wire_bytes)


def _untraced_sender(r: ReceiveHalf) -> Hop:
    from flowmap.model.reader import Hop

    nbytes = r.wire_bytes or 0
    return Hop(r.t_ns, r.pid, UNTRACED, r.owner, r.name, nbytes, (), (), None, None,
               r.transport, (), r.wire_bytes)
