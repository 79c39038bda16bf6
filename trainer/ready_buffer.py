"""The ready buffer: finished leaf trajectories waiting for a batch, by `uid` group.

Each sample is tagged with the weight version current when it is registered
(the essay's rule): that tag, against the id of the batch that would train on
it, is the version gap that decides whether it may still be used. A group is
*complete* once all `n` trajectories of its row have come back, and only
complete groups are taken, because GRPO normalises within a group.

The buffer knows a group from the moment its first trajectory is dispatched
(`expect`), so the staleness dry run can count the work still in rollout, and
groups leave it whole: taken for a batch, or dropped (stale, zero variance).
A trajectory of a dropped group that comes back later is refused on arrival:
its group can never train whole.

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
    """One env group: its trajectories dispatched, the samples of those that have come back."""

    uid: str
    num_trajectories: int  # n: how many trajectories the row was expanded into
    num_returned: int = 0  # trajectories registered (all their leaves at once)
    samples: list[LeafTrajectory] = field(default_factory=list)
    first_seq: int = 0  # dispatch order of the group: the oldest-first tie-break
    num_dispatched: int = 0  # trajectories sent to rollout so far

    @property
    def complete(self) -> bool:
        return self.num_returned >= self.num_trajectories

    @property
    def in_rollout(self) -> int:
        """Trajectories dispatched and not yet back."""
        return max(self.num_dispatched - self.num_returned, 0)

    @property
    def oldest_tag(self) -> int:
        """The group's age: its oldest sample's tag (-1 before any came back)."""
        return min((s.version_tag for s in self.samples), default=-1)


class ReadyBuffer:
    def __init__(self, group_size: int) -> None:
        self.group_size = group_size
        self.groups: dict[str, GroupEntry] = {}
        self._seq = itertools.count()
        self._refused: dict[str, int] = {}  # dropped uid -> its trajectories still in rollout
        self._dropped: set[str] = set()  # every uid dropped whole (its later trajectories skip)

    @property
    def depth(self) -> int:
        """Samples (leaf trajectories) waiting."""
        return sum(len(g.samples) for g in self.groups.values())

    def _entry(self, uid: str) -> GroupEntry:
        entry = self.groups.get(uid)
        if entry is None:
            entry = self.groups[uid] = GroupEntry(uid, self.group_size, first_seq=next(self._seq))
        return entry

    def expect(self, uid: str) -> bool:
        """One trajectory of `uid` is going to rollout (the dry run counts it as work in flight).

        False when the group was already dropped (stale while still being dispatched):
        the trajectory is not worth starting.
        """
        if uid in self._dropped:
            return False
        self._entry(uid).num_dispatched += 1
        return True

    def register(self, leaves: list[LeafTrajectory], version: int) -> list[LeafTrajectory]:
        """Add the leaves of one finished trajectory, tagged with the current weight version.

        Returns the leaves refused because their group was already dropped (the
        caller records them as dropped); [] when they were taken in.
        """
        if not leaves:
            return []
        uid = leaves[0].uid
        for leaf in leaves:
            leaf.version_tag = version
        if uid in self._refused:
            self._refused[uid] -= 1
            if self._refused[uid] <= 0:
                del self._refused[uid]
            return leaves
        entry = self._entry(uid)
        entry.samples.extend(leaves)
        entry.num_returned += 1
        entry.num_dispatched = max(entry.num_dispatched, entry.num_returned)
        flowmap.counter("ready_buffer_depth", self.depth)
        return []

    def complete_groups(self) -> list[GroupEntry]:
        return [g for g in self.groups.values() if g.complete and g.samples]

    def drop_groups(self, uids: list[str]) -> list[LeafTrajectory]:
        """Remove whole groups (their samples are returned); later arrivals are refused."""
        removed: list[LeafTrajectory] = []
        for uid in uids:
            entry = self.groups.pop(uid)
            removed += entry.samples
            self._dropped.add(uid)
            if entry.in_rollout:
                self._refused[uid] = entry.in_rollout
        flowmap.counter("ready_buffer_depth", self.depth)
        return removed

    def take_groups(self, uids: list[str]) -> list[LeafTrajectory]:
        """Remove whole, complete groups, in the order given; their samples in registration order."""
        out: list[LeafTrajectory] = []
        for uid in uids:
            entry = self.groups.pop(uid)
            if not entry.complete:
                raise ValueError(f"group {uid} has {entry.num_returned} of "
                                 f"{entry.num_trajectories} trajectories back; only whole groups train")
            out += entry.samples
        flowmap.counter("ready_buffer_depth", self.depth)
        return out
