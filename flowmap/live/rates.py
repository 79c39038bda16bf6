"""Per-seam rates over a recent window, from successive snapshots of the run's totals.

A rate is the difference of two totals over the time between them, so it
reads every hop the totals read — kept, folded, or joined from transport
halves — and needs only a few (time, totals) pairs, never the hops.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from flowmap.model.types import SeamKey, SeamStats

WINDOW_S = 10.0  # "recent": the last ten seconds, as a top-style view means it


class Rates:
    """Bytes/s and hops/s per seam over the last `window_s` seconds of wall time."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._points: deque[tuple[float, dict[SeamKey, tuple[int, int]]]] = deque()

    def add(self, now_s: float, seams: Mapping[SeamKey, SeamStats]) -> None:
        self._points.append((now_s, {k: (s.hops, s.total_bytes) for k, s in seams.items()}))
        while len(self._points) > 2 and now_s - self._points[1][0] >= self.window_s:
            self._points.popleft()

    def per_second(self) -> dict[SeamKey, tuple[float, float]]:
        """`seam -> (bytes/s, hops/s)` between the oldest and newest point; empty with one point."""
        if len(self._points) < 2:
            return {}
        (t0, old), (t1, new) = self._points[0], self._points[-1]
        span = max(t1 - t0, 1e-9)
        out = {}
        for key, (hops, nbytes) in new.items():
            h0, b0 = old.get(key, (0, 0))
            out[key] = ((nbytes - b0) / span, (hops - h0) / span)
        return out
