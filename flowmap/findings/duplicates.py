"""One storage copied to several destinations at once (same process, same step).

Storage ids are addresses: two hops from one sender in one step carrying the
same ids carry the same bytes. Hops by reference (`ref`) or by CUDA IPC handle copy nothing.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from flowmap.findings.common import DUPLICATE, Finding, RoleKey, per_step
from flowmap.model.format import seam_label
from flowmap.model.types import NO_COPY, role_of
from flowmap.read.events import Hop

if TYPE_CHECKING:
    from flowmap.model.view import RunView

# Hops without a step are grouped by 100 ms windows instead.
WINDOW_NS = 100_000_000
When = int | tuple[str, int]
# (pid, sender, step, storages, each leaf's shape and dtype): a storage id is where a tensor
# starts, so `x` and `x[:1]` share one; the same data is the same storages *and* shapes
CopyKey = tuple[int, str, When, tuple[int, ...], tuple[tuple[Any, str], ...]]


def detect(view: RunView) -> list[Finding]:
    first: dict[CopyKey, Hop] = {}
    groups: dict[CopyKey, list[Hop]] = {}  # only keys seen more than once
    for h in view.events.hops:
        if h.storages and h.transport not in NO_COPY:
            when: When = h.step if h.step is not None else ("t", h.t_ns // WINDOW_NS)
            key = (h.pid, h.src, when, h.storages,
                   tuple((leaf.shape, leaf.dtype) for leaf in h.leaves))
            seen = first.setdefault(key, h)
            if seen is not h:
                groups.setdefault(key, [seen]).append(h)
    extra: dict[RoleKey, float] = defaultdict(float)
    labels: dict[RoleKey, set[str]] = defaultdict(set)
    dests: dict[RoleKey, set[str]] = defaultdict(set)
    for group in groups.values():
        targets = {(h.dst, h.name) for h in group}
        if len(targets) < 2:
            continue
        rk = (role_of(group[0].src), "*", group[0].name)
        extra[rk] += sum(h.nbytes for h in group) - max(h.nbytes for h in group)
        labels[rk].update(seam_label(h.seam) for h in group)
        dests[rk].update(h.dst for h in group)
    out = []
    for rk, nbytes in extra.items():
        bps = nbytes / view.detail.num_steps
        to = ", ".join(sorted(dests[rk]))
        out.append(Finding(
            DUPLICATE, sorted(labels[rk]), bps,
            f"The same `{rk[2]}` storage leaves {rk[0]} for {len(dests[rk])} destinations "
            f"({to}), {per_step(bps)} in extra copies: slice it per destination if each reads a "
            "part, else share it once (shared memory, a broadcast) and pass handles.",
        ))
    return out
