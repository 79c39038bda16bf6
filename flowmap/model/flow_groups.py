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
    """The roots' hops into each group, by group and payload name, in time order."""

    def __init__(self, ordered: Sequence[Hop]) -> None:
        self.into: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, h in enumerate(ordered):
            if h.transport == COLLECTIVE and h.dst.startswith(GROUP) and h.name in ROOTED:
                self.into[(h.dst, h.name)].append(i)
        self.taken: dict[tuple[int, str, str], int] = defaultdict(int)  # receipts read so far
        self.received: set[int] = set()  # roots' hops a receipt of was read before them

    def root_of(self, h: Hop) -> int | None:
        """The index of the root's hop whose message `h` (a receipt out of a group) is: ranks
        call a group's collectives in one order, so a receiver's k-th receipt of a name is
        the k-th message its roots sent under it (clocks of two processes may disagree by
        more than two broadcasts take)."""
        if h.transport != COLLECTIVE or not h.src.startswith(GROUP) or h.name not in ROOTED:
            return None
        sent = self.into.get((h.src, h.name))
        if not sent:
            return None
        key = (h.pid, h.src, h.name)
        k = self.taken[key]
        self.taken[key] = k + 1
        return sent[k] if k < len(sent) else None
