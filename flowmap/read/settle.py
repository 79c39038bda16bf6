"""Settle a live watch's transport halves: join each message once, and hold what it made.

A queue, pipe or socket hop is written as two halves, one by each process
(`flowmap.read.halves`), and only the run can join them, so a reader holds
every half until the end. A watch of a long queue-based run would then hold
two records per message and join them all again at every update. Instead, at
each update, the halves whose join is settled are joined once, as the
finished reader joins them: their hops are kept one by one up to a detail
window of their own and folded per seam and step past it, and the halves are
forgotten. What stays held is what is still in flight, so what a watch holds
and joins again is bounded by the messages waiting, not by the run's length.

What settles, and how each joins as it would among all of a run's halves:

- a message received: its receive and the send the join's rules give it (the
  earliest held of its channel and key, or one of its family with its key);
- a receive of no send held, at the update after it was first seen (its
  sender's shard has been read once more since): a copy of a message settled
  before (fan-out: the senders of settled messages are remembered), hopping
  from its sender; until then the watch shows it so already;
- a send nobody has received, once its step is past the blocks' horizon
  (`flowmap.read.blocks`): to its fallback destination, as unreceived; of no
  step, it waits (a message in a queue) while fewer than half the bound
  `max_halves` wait, then the oldest go; receives of no traced sender wait
  the same way, and go as from an untraced sender;
- halves folded by `trace --aggregate` (joined by count per channel), once
  their step is past the horizon, among themselves.

Not exact, as the blocks are not: a message received only after it settled as
unreceived (past the horizon, or waiting past the bound) counts twice, to its
fallback destination and to its receiver; a copy received after its sender was
forgotten (past two generations of `max_halves` settled messages) counts as from
an untraced sender; messages of the same bytes on one channel pair in the
order they are read, which is the order sent unless one process's shard is
read far behind another's (catching up with a backlog); a channel whose
folded halves are shared out among several readers is shared out per
settled round, not over the whole run (hop counts stay exact, bytes are
apportioned).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter

from flowmap.read import events
from flowmap.read.events import Half, Hop, ReceiveHalf, SendHalf
from flowmap.read.fold import fold_hops, merge_seam_steps
from flowmap.read.halves import claimed_sender, digest_keyed, family, join_halves, joined_hop, pair

MAX_HALVES = 8192  # the bound on halves waiting (half of it for sends, half for receives)

_T_NS = attrgetter("t_ns")
_Key = tuple[str, str, str, int | None, str, int]  # src, dst, name, step, transport, pid
_Message = tuple[str, str]  # channel (or family), key


class HalfSettler:
    """What the settled halves of a watched run made: kept hops and per-step records."""

    def __init__(self, max_halves: int = MAX_HALVES, keep_hops: int = 0) -> None:
        if max_halves < 4:
            raise ValueError("a bound of at least 4 halves")
        self.max_halves = max_halves
        self.keep_hops = keep_hops  # settled hops kept one by one (the first ones)
        self.hops: list[Hop] = []
        self.steps: dict[_Key, events.SeamStep] = {}  # past the kept hops, merged per seam and step
        self.shared: set[str] = set()  # channels whose folded sends were shared out
        # Senders of settled messages, for copies received later: the newest ones, in two
        # generations of `max_halves` sends (a full one becomes the old, the old is dropped).
        self.claimed: dict[_Message, SendHalf] = {}
        self.claimed_before: dict[_Message, SendHalf] = {}
        self.noted = 0  # sends in `claimed`
        # Receives held with no send at the last settle (still held: their ids are theirs).
        self.unpaired: set[int] = set()
        self.settled = 0  # halves settled so far

    def settle(self, held: list[list[Half]], before: int | None) -> None:
        """Take the halves that settle out of `held` (each shard's own list, changed in
        place) and join them; `before`: the steps below it are past the blocks' horizon."""
        full = [h for hs in held for h in hs if isinstance(h, (SendHalf, ReceiveHalf))]
        take, unpaired = self._paired(full)
        seen = [r for r in unpaired if id(r) in self.unpaired]  # unpaired at the last settle too
        copied, copies = self._copies(seen, _keys(s for s in full if isinstance(s, SendHalf)
                                                  and id(s) not in take))
        self._note_senders(take)
        gone_copies = set(map(id, copied))
        unpaired = [r for r in unpaired if id(r) not in gone_copies]
        take.update(self._waited(full, take, unpaired, before))
        self.unpaired = {id(r) for r in unpaired if id(r) not in take}
        taken: list[Half] = list(take.values())
        if before is not None:
            taken += [h for hs in held for h in hs if _folded_before(h, before)]
        if not taken and not copied:
            return
        gone = set(map(id, taken)) | gone_copies
        for hs in held:
            hs[:] = [h for h in hs if id(h) not in gone]
        self.settled += len(gone)
        joined = join_halves(taken)
        self.shared.update(joined.shared)
        self._hold(sorted([*joined.hops, *copies], key=_T_NS), joined.seam_steps)

    def _paired(self, full: list[SendHalf | ReceiveHalf]
                ) -> tuple[dict[int, Half], list[ReceiveHalf]]:
        """The messages received (both halves, by id), as the join's first two rules pair
        them (`flowmap.read.halves.pair`); and the receives with no send held, oldest first."""
        p = pair(sorted((h for h in full if isinstance(h, SendHalf)), key=_T_NS),
                 sorted((h for h in full if isinstance(h, ReceiveHalf)), key=_T_NS))
        take: dict[int, Half] = {}
        for s, r in p.pairs:
            take[id(s)], take[id(r)] = s, r
        return take, p.unpaired

    def _waited(self, full: list[SendHalf | ReceiveHalf], take: dict[int, Half],
                unpaired: list[ReceiveHalf], before: int | None) -> dict[int, Half]:
        """Sends nobody received past the horizon, and the oldest of those of no step and
        of the receives of no send past half the bound each."""
        out: dict[int, Half] = {}
        waiting: list[SendHalf] = []
        for s in sorted((h for h in full if isinstance(h, SendHalf) and id(h) not in take),
                        key=_T_NS):
            step = s.hop.step
            if before is not None and step is not None:
                if step < before:
                    out[id(s)] = s
            else:
                waiting.append(s)
        half, quarter = self.max_halves // 2, self.max_halves // 4
        for lot in (waiting, unpaired):
            if len(lot) > half:
                out.update((id(h), h) for h in lot[:len(lot) - quarter])
        return out

    def _note_senders(self, take: dict[int, Half]) -> None:
        """Note the senders of the messages settling, for copies received later."""
        for s in sorted((h for h in take.values() if isinstance(h, SendHalf)), key=_T_NS):
            if self.noted >= self.max_halves:
                self.claimed_before, self.claimed, self.noted = self.claimed, {}, 0
            self.noted += 1
            self.claimed[(s.channel, s.key)] = s
            if digest_keyed(s):
                self.claimed[(family(s), s.key)] = s

    def _copies(self, receives: Iterable[ReceiveHalf], sent: set[_Message]
                ) -> tuple[list[ReceiveHalf], list[Hop]]:
        """Of `receives` (of no send held), those of a copy of a settled message, none of its
        sends being held (`sent`), and their hops from the message's sender."""
        copied: list[ReceiveHalf] = []
        hops: list[Hop] = []
        if not self.claimed and not self.claimed_before:
            return copied, hops
        for r in receives:
            if (r.channel, r.key) in sent or (family(r), r.key) in sent:
                continue
            s = claimed_sender(self.claimed, r) or claimed_sender(self.claimed_before, r)
            if s is not None:
                hops.append(joined_hop(s, r.owner, r))
                copied.append(r)
        return copied, hops

    def _hold(self, hops: list[Hop], folded: Iterable[events.SeamStep]) -> None:
        """Keep the first settled hops one by one, and fold the rest per seam and step."""
        room = max(0, self.keep_hops - len(self.hops))
        self.hops += hops[:room]
        for st in [*fold_hops(hops[room:]), *folded]:
            key = (st.src, st.dst, st.name, st.step, st.transport, st.pid)
            got = self.steps.get(key)
            self.steps[key] = st if got is None else merge_seam_steps(got, st)

    def give(self, shards: list[events.Shard]) -> None:
        """Add what settled to the shards of its processes (a snapshot's: copies), and show
        the receives held of a copy of a settled message as its hops (they settle so at the
        next update, once their sender's shard has been read again)."""
        if not shards:
            return
        by_pid = {sh.pid: sh for sh in shards}
        for h in self.hops:
            by_pid.get(h.pid, shards[0]).hops.append(h)
        for st in self.steps.values():
            by_pid.get(st.pid, shards[0]).seam_steps.append(st)
        held: Sequence[Half] = [h for sh in shards for h in sh.halves]
        waiting = [h for h in held if isinstance(h, ReceiveHalf) and id(h) in self.unpaired]
        if not waiting:
            return
        copied, hops = self._copies(waiting, _keys(h for h in held if isinstance(h, SendHalf)))
        if copied:
            shown = set(map(id, copied))
            for sh in shards:
                sh.halves = [h for h in sh.halves if id(h) not in shown]
            for h in hops:
                by_pid.get(h.pid, shards[0]).hops.append(h)

    def retire(self, before: int) -> None:
        """Forget the records of steps below `before` (the blocks hold them now)."""
        self.steps = {k: st for k, st in self.steps.items() if st.step is None or st.step >= before}


def _keys(sends: Iterable[SendHalf]) -> set[_Message]:
    """The messages of `sends` as a receive looks them up: by channel, and by family."""
    out: set[_Message] = set()
    for s in sends:
        out.add((s.channel, s.key))
        if digest_keyed(s):
            out.add((family(s), s.key))
    return out


def _folded_before(h: Half, before: int) -> bool:
    """Whether `h` is a folded half of a step below `before`."""
    step = (h.seam_step.step if isinstance(h, events.SendFold)
            else h.step if isinstance(h, events.ReceiveFold) else None)
    return step is not None and step < before
