"""Settle a live watch's transport halves: join each message once, and hold what it made.

`flowmap.load` holds every half until the run's end (`flowmap.read.halves`); a watch
doing so would hold two records per message and join them all again at each update.
So the halves whose join is settled are joined once, by the join's own rules, kept as
the hops they made (the first `keep_hops`, the rest folded per seam and step), and
forgotten: what stays held is what is still in flight. A watch's frames read fewer of
them one by one (`live_hops`: the rest folded too, as they come; `whole` is what the
run's end reads). What settles when, and where that is not exact, is in docs/live.md
("nor per message").
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from flowmap.read import events
from flowmap.read.events import Half, Hop, ReceiveHalf, SeamStep, SendHalf, Shard
from flowmap.read.fold import fold_hops, merge_seam_steps
from flowmap.read.halves import claimed_sender, digest_keyed, family, join_halves, joined_hop, pair
from flowmap.read.live_window import StepIndex

MAX_HALVES = 8192  # the bound on halves waiting (half of it for sends, half for receives)

_T_NS = attrgetter("t_ns")
_Message = tuple[str, str]  # channel (or family), key


class HalfSettler:
    """What the settled halves of a watched run made: kept hops and per-step records."""

    def __init__(self, max_halves: int = MAX_HALVES, keep_hops: int = 0,
                 live_hops: int | None = None) -> None:
        if max_halves < 4:
            raise ValueError("a bound of at least 4 halves")
        self.max_halves = max_halves
        self.keep_hops = keep_hops  # settled hops kept one by one (the first ones)
        self.live_hops = live_hops  # of those, the frame's (None: all)
        self.hops: list[Hop] = []
        self.steps: dict[tuple[object, ...], SeamStep] = {}  # the rest, per seam, step, process
        self.live_steps: dict[tuple[object, ...], SeamStep] = {}  # kept hops past `live_hops`
        self.by_step = StepIndex()  # with `live_hops`: kept hops of steps not yet in blocks
        self.shared: set[str] = set()  # channels whose folded sends were shared out
        # Senders of settled messages, for copies received later: two generations of
        # `max_halves` sends (a full one becomes the old, the old is dropped).
        self.claimed: dict[_Message, SendHalf] = {}
        self.claimed_before: dict[_Message, SendHalf] = {}
        self.noted = 0  # sends in `claimed`
        self.unpaired: set[int] = set()  # ids of the receives of no send at the last settle
        self.settled = 0  # halves settled so far

    def settle(self, held: list[list[Half]], before: int | None) -> None:
        """Take the halves that settle out of `held` (each shard's own list, changed in
        place) and join them; `before`: the steps below it are past the blocks' horizon."""
        full = [h for hs in held for h in hs if isinstance(h, (SendHalf, ReceiveHalf))]
        p = pair(sorted((h for h in full if isinstance(h, SendHalf)), key=_T_NS),
                 sorted((h for h in full if isinstance(h, ReceiveHalf)), key=_T_NS))
        take: dict[int, Half] = {id(h): h for sr in p.pairs for h in sr}  # messages received
        unsent = [s for s in p.unclaimed if id(s) not in p.taken]  # oldest first
        # a receive of no send held, unpaired at the last settle too: a copy of a settled message
        copies = self._copies([r for r in p.unpaired if id(r) in self.unpaired], unsent)
        for s in sorted((s for s, _ in p.pairs), key=_T_NS):
            if self.noted >= self.max_halves:
                self.claimed_before, self.claimed, self.noted = self.claimed, {}, 0
            self.noted += 1
            _index(self.claimed, s)
        # sends nobody received past the horizon; past half the bound, the oldest of those of
        # no step (with no horizon: of all) and of the receives of no send
        waiting: list[Half] = []
        for s in unsent:
            if before is None or s.hop.step is None:
                waiting.append(s)
            elif s.hop.step < before:
                take[id(s)] = s
        unpaired = [r for r in p.unpaired if id(r) not in copies]
        for lot in (waiting, unpaired):
            if len(lot) > self.max_halves // 2:
                take.update((id(h), h) for h in lot[:len(lot) - self.max_halves // 4])
        self.unpaired = {id(r) for r in unpaired if id(r) not in take}
        if before is not None:
            take.update((id(h), h) for hs in held for h in hs  # folded halves of old steps
                        if isinstance(h, (events.ReceiveFold, events.SendFold)) and h.step is not None
                        and h.step < before)
        if not take and not copies:
            return
        gone = take.keys() | copies.keys()
        for hs in held:
            hs[:] = [h for h in hs if id(h) not in gone]
        self.settled += len(gone)
        joined = join_halves(list(take.values()))
        self.shared.update(joined.shared)
        self._hold(sorted([*joined.hops, *copies.values()], key=_T_NS), joined.seam_steps)

    def _copies(self, receives: list[ReceiveHalf], held: Iterable[Half]) -> dict[int, Hop]:
        """Of `receives` (of no send held), those of a copy of a settled message none of whose
        sends is `held`, by id: their hops from the message's sender."""
        out: dict[int, Hop] = {}
        if not receives or not (self.claimed or self.claimed_before):
            return out
        sent: dict[_Message, SendHalf] = {}
        for h in held:
            if isinstance(h, SendHalf):
                _index(sent, h)
        for r in receives:
            s = None if claimed_sender(sent, r) else (
                claimed_sender(self.claimed, r) or claimed_sender(self.claimed_before, r))
            if s is not None:
                out[id(r)] = joined_hop(s, r.owner, r)
        return out

    def _hold(self, hops: list[Hop], folded: Iterable[SeamStep]) -> None:
        """Keep the first settled hops one by one, and fold the rest per seam and step."""
        room = max(0, self.keep_hops - len(self.hops))
        start = len(self.hops)
        self.hops += hops[:room]
        _merge(self.steps, [*fold_hops(hops[room:]), *folded])
        if self.live_hops is not None:
            _merge(self.live_steps, fold_hops(self.hops[max(start, self.live_hops):]))
            self.by_step.add(self.hops[start:])

    def records(self, whole: bool = True) -> tuple[list[Hop], list[SeamStep]]:
        """The hops kept and the records folded, in the frame's window unless `whole`."""
        if whole or self.live_hops is None:
            return self.hops, list(self.steps.values())
        return self.hops[:self.live_hops], [*self.steps.values(), *self.live_steps.values()]

    def give(self, shards: list[Shard], whole: bool = True) -> None:
        """Add what settled to the shards (a snapshot's), and show the receives held of a
        copy of a settled message as its hops: they settle so at the next update, once
        their sender's shard has been read again."""
        held = [h for sh in shards for h in sh.halves]
        copies = self._copies([h for h in held if isinstance(h, ReceiveHalf)
                               and id(h) in self.unpaired], held)
        if copies:
            for sh in shards:
                sh.halves = [h for h in sh.halves if id(h) not in copies]
        hops, steps = self.records(whole)
        give_records(shards, [*hops, *copies.values()], steps)

    def retire(self, before: int) -> None:
        """Forget the records of steps below `before` (the blocks hold them now)."""
        self.steps = _since(self.steps, before)
        self.live_steps = _since(self.live_steps, before)
        self.by_step.retire(before)


def give_records(shards: list[Shard], hops: Iterable[Hop], steps: Iterable[SeamStep]) -> None:
    """Add records a watch holds to the shards of their processes (the first, if gone)."""
    if not shards:
        return
    by_pid = {sh.pid: sh for sh in shards}
    for h in hops:
        by_pid.get(h.pid, shards[0]).hops.append(h)
    for st in steps:
        by_pid.get(st.pid, shards[0]).seam_steps.append(st)


def _merge(into: dict[tuple[object, ...], SeamStep], steps: Iterable[SeamStep]) -> None:
    for st in steps:
        got = into.get(key := (st.src, st.dst, st.name, st.step, st.transport, st.pid))
        into[key] = st if got is None else merge_seam_steps(got, st)


def _since(steps: dict[tuple[object, ...], SeamStep], before: int
           ) -> dict[tuple[object, ...], SeamStep]:
    return {k: st for k, st in steps.items() if st.step is None or st.step >= before}


def _index(table: dict[_Message, SendHalf], s: SendHalf) -> None:
    """`s` as a receive looks it up: by channel, and by family where keys are digests."""
    table[(s.channel, s.key)] = s
    if digest_keyed(s):
        table[(family(s), s.key)] = s
