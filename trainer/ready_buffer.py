"""The ready buffer: finished leaf trajectories waiting for a batch, by `uid` group.

Each sample is tagged with the weight version current when it is registered
(the essay's rule): that tag, against the id of the batch that would train on
it, is the version gap that decides whether it may still be used. A group is
*complete* once all `n` trajectories of its row have come back, and only
complete groups are taken, because GRPO normalises within a group.

Depth (samples waiting) is a metric, not just a size: every version that
passes while a sample waits adds one to its gap.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import flowmap
from flowmap.trainer.tree import LeafTrajectory


@dataclass(slots=True)
class GroupEntry:
    """The samples of one env group that have come back so far."""

    uid: str
    num_trajectories: int  # n: how many trajectories the row was expanded into
    num_returned: int = 0  # trajectories registered (all their leaves at once)
    samples: list[LeafTrajectory] = field(default_factory=list)
    first_seq: int = 0  # registration order of its first sample: oldest-first tie-break

    @property
    def complete(self) -> bool:
        return self.num_returned >= self.num_trajectories

    @property
    def oldest_tag(self) -> int:
        return min((s.version_tag for s in self.samples), default=-1)


class ReadyBuffer:
    def __init__(self, group_size: int) -> None:
        self.group_size = group_size
        self.groups: dict[str, GroupEntry] = {}
        self._seq = itertools.count()

    @property
    def depth(self) -> int:
        """Samples (leaf trajectories) waiting."""
        return sum(len(g.samples) for g in self.groups.values())

    def register(self, leaves: list[LeafTrajectory], version: int) -> None:
        """Add the leaves of one finished trajectory, tagged with the current weight version."""
        if not leaves:
            return
        uid = leaves[0].uid
        seq = next(self._seq)
        entry = self.groups.setdefault(uid, GroupEntry(uid, self.group_size, first_seq=seq))
        for leaf in leaves:
            leaf.version_tag = version
        entry.samples.extend(leaves)
        entry.num_returned += 1
        flowmap.counter("ready_buffer_depth", self.depth)

    def complete_groups(self) -> list[GroupEntry]:
        return [g for g in self.groups.values() if g.complete and g.samples]

    def remove(self, leaf_ids: set[str]) -> list[LeafTrajectory]:
        """Take the given samples out (dropped or batched); empty complete groups vanish."""
        removed: list[LeafTrajectory] = []
        for uid in list(self.groups):
            entry = self.groups[uid]
            keep = [s for s in entry.samples if s.leaf_id not in leaf_ids]
            removed += [s for s in entry.samples if s.leaf_id in leaf_ids]
            entry.samples = keep
            if entry.complete and not keep:
                del self.groups[uid]
        flowmap.counter("ready_buffer_depth", self.depth)
        return removed

    def take_groups(self, uids: list[str]) -> list[LeafTrajectory]:
        """Remove whole groups, in the order given; their samples in registration order."""
        out: list[LeafTrajectory] = []
        for uid in uids:
            out += self.groups.pop(uid).samples
        flowmap.counter("ready_buffer_depth", self.depth)
        return out
