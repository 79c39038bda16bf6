"""A rooted collective's receipts, traced to what its root sent.

torch.distributed records each rank's side of a `broadcast` or `scatter`: the root's
hop into the group (`trainer/rank0 -> group[0,1] : broadcast`) and each receiver's
hop out of it (`group[0,1] -> rollout/rank1 : broadcast`), in different processes, so
no storage links them. The group made nothing: what a receiver got is what the root
sent, the root's hop of the same group and name, in the order the ranks call them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from flowmap.read.events import Hop
from flowmap.trace_format import COLLECTIVE, GROUP

# torch.distributed's ops with a root that sends and ranks that receive (`dist_ops`: a `src`);
# in the others (all_reduce, all_gather) every rank's input makes what each receives
ROOTED = frozenset(("broadcast", "scatter", "broadcast_object_list", "scatter_object_list"))


class Roots:
    """Each receipt out of a group, paired with the root's hop whose message it is."""

    def __init__(self, ordered: Sequence[Hop]) -> None:
        into: dict[tuple[str, str], list[Hop]] = defaultdict(list)
        for h in ordered:
            if h.transport == COLLECTIVE and h.dst.startswith(GROUP) and h.name in ROOTED:
                into[(h.dst, h.name)].append(h)
        taken: dict[tuple[int, str, str], int] = defaultdict(int)  # receipts paired so far
        self.root: dict[int, Hop] = {}  # id(receipt) -> the root's hop it received
        for h in ordered if into else ():
            if h.transport != COLLECTIVE or not h.src.startswith(GROUP) or h.name not in ROOTED:
                continue
            sent, key = into.get((h.src, h.name)), (h.pid, h.src, h.name)
            k = taken[key]
            taken[key] = k + 1
            if sent and k < len(sent):
                self.root[id(h)] = sent[k]

    def ordered(self, hops: list[Hop]) -> list[Hop]:
        """`hops` (in time order) with each receipt after the root's hop it received: a
        receiver's clock, or its call's start, may be read before the root's (ranks call a
        group's collectives in one order, so a receiver's k-th receipt of a name is the k-th
        message its roots sent under it)."""
        if not self.root:
            return hops
        at = {id(h): i for i, h in enumerate(hops)}
        return [h for _, h in sorted(
            ((max(i, at[id(self.root[id(h)])] + 0.5) if id(h) in self.root else i, h)
             for i, h in enumerate(hops)), key=lambda p: p[0])]
