"""Perfetto slices for folded hops: one slice per seam and step, on a track per seam.

Past a long run's detail window hops are folded per seam and step
(`flowmap.read.fold`); there is no single hop left to draw, so each
`SeamStep` becomes one `X` slice from its first hop to its last, on a track
of its own (`⋯ src → dst : name`, in the process that recorded it) so that
it never overlaps the slices of kept hops. Its args hold the step's hops and
bytes: nothing folded is left out of the file.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from flowmap.model.format import seam_label
from flowmap.read.events import SeamStep

MIN_SLICE_US = 2  # as wide as a kept hop's slice at its narrowest

Timed = tuple[int, int, dict[str, Any]]


def folded_events(seam_steps: Sequence[SeamStep], t0_ns: int, first_tid: int
                  ) -> tuple[list[dict[str, Any]], list[Timed]]:
    """(thread metadata, timed slices) of `seam_steps`, tids from `first_tid` on."""
    by_track: dict[tuple[int, tuple[str, str, str]], list[SeamStep]] = defaultdict(list)
    for st in seam_steps:
        by_track[(st.pid, st.seam)].append(st)
    meta: list[dict[str, Any]] = []
    timed: list[Timed] = []
    for tid, ((pid, seam), steps) in enumerate(sorted(by_track.items()), start=first_tid):
        label = seam_label(seam)
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                     "args": {"name": f"⋯ {label} (folded per step)"}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                     "args": {"sort_index": tid}})
        cursor = None  # slices on one track never overlap: each starts after the last ends
        for st in sorted(steps, key=lambda s: (s.t_first_ns, s.t_ns)):
            ts = (st.t_first_ns - t0_ns) // 1000
            end = max((st.t_ns - t0_ns) // 1000, ts + MIN_SLICE_US)
            if cursor is not None and ts < cursor:
                ts = cursor
                end = max(end, ts + MIN_SLICE_US)
            cursor = end
            args: dict[str, Any] = {"seam": label, "hops": st.hops, "bytes": st.nbytes_sum,
                                    "min_bytes": st.nbytes_min, "max_bytes": st.nbytes_max,
                                    "transport": st.transport, "num_items": st.num_items}
            if st.step is not None:
                args["step"] = st.step
            timed.append((ts, 1, {"ph": "X", "cat": "folded", "name": f"{st.name} ×{st.hops}",
                                  "pid": pid, "tid": tid, "ts": ts, "dur": end - ts,
                                  "args": args}))
    return meta, timed
