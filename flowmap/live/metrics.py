"""`/metrics`: the watched run in the Prometheus text format, through `prometheus_client`.

A custom collector reads the latest frame of the one `Watch` (never the
shards): a scrape costs a walk over seams and owners, whatever the run's
length. Per-seam counters are the run's per-seam figures, so at the end they
equal `flowmap report`'s. Prometheus's conventions hold:

- a counter never goes down: a live read can move hops between seams (a
  queue's receive is `(untraced) -> x` until its send is read), so each
  series exports the most it has shown; once the program has ended, a series
  the run no longer has goes away (stale, not lower);
- label sets stay stable: a seam's series are keyed by src, dst and name; the
  transports it moved by are `flowmap_seam_transport_info` series of their own,
  so a seam taking a second transport does not split its counters;
- series are capped: the first `MAX_SERIES` seams (owners, reasons) seen get
  series of their own, the rest are summed under the label value `other`;
- names pass promtool's lint (counters end in `_total`, units in the name,
  no type names); `flowmap_run_state` and `flowmap_last_event_age_seconds`
  say whether the program runs and how fresh the figures are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from flowmap.live.status import CUT_SHORT, EXITED, RUNNING
from flowmap.live.watch import Frame

SEAM_LABELS = ["src", "dst", "name"]
MAX_SERIES = 256  # series of their own per family; the rest summed under `other`
OTHER = "other"
GONE = "removed"  # the run state of a run directory removed while watched
STATES = (RUNNING, EXITED, CUT_SHORT, GONE)


class _Pinned:
    """The first `MAX_SERIES` label sets seen of one family, kept for the watch's life."""

    def __init__(self, other: tuple[str, ...]) -> None:
        self.keys: dict[tuple[str, ...], None] = {}
        self.other = other

    def label(self, key: tuple[str, ...]) -> tuple[str, ...]:
        if key in self.keys:
            return key
        if len(self.keys) < MAX_SERIES:
            self.keys[key] = None
            return key
        return self.other


class RunCollector(Collector):
    """Collects the metrics of the frame `frame()` returns (None: nothing read yet)."""

    def __init__(self, frame: Callable[[], Frame | None]) -> None:
        self.frame = frame
        self.pins: dict[str, _Pinned] = {}
        self.shown: dict[tuple[str, tuple[str, ...]], float] = {}  # the most each has shown
        self.epoch = 0  # the frame's: a run made anew starts its counters again
        self.lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        with self.lock:  # scrapes come on threads of their own; each sees the series whole
            families = list(self._families())
        yield from families

    def _counter(self, name: str, doc: str, labels: list[str],
                 values: Iterable[tuple[tuple[str, ...], float]], ended: bool) -> Metric:
        """A counter family of `values`, capped and never lower than it has shown."""
        pin = self.pins.setdefault(name, _Pinned((OTHER,) * len(labels)))
        sums: dict[tuple[str, ...], float] = {}
        for key, value in values:
            k = pin.label(key)
            sums[k] = sums.get(k, 0) + value
        family = CounterMetricFamily(name, doc, labels=labels)
        keys = list(sums) if ended else [*sums, *(k for (n, k) in self.shown
                                                   if n == name and k not in sums)]
        for k in keys:
            v = max(sums.get(k, 0), self.shown.get((name, k), 0))
            self.shown[(name, k)] = v
            family.add_metric(list(k), v)
        return family

    def _families(self) -> Iterator[Metric]:
        frame = self.frame()
        if frame is None:
            return
        if frame.epoch != self.epoch:
            self.pins, self.shown, self.epoch = {}, {}, frame.epoch
        run = frame.run
        state = GONE if frame.gone else frame.status.state
        ended = state != RUNNING
        seams = run.seams.values()
        yield self._counter("flowmap_seam_bytes", "Payload bytes that crossed the seam",
                            SEAM_LABELS, (((s.src, s.dst, s.name), s.total_bytes) for s in seams),
                            ended)
        yield self._counter("flowmap_seam_hops", "Hops of the seam", SEAM_LABELS,
                            (((s.src, s.dst, s.name), s.hops) for s in seams), ended)
        info = GaugeMetricFamily("flowmap_seam_transport_info",
                                 "A transport the seam's payloads moved by (1)",
                                 labels=[*SEAM_LABELS, "transport"])
        pin = self.pins.get("flowmap_seam_bytes")
        for s in seams:
            if pin is not None and (s.src, s.dst, s.name) in pin.keys:
                for t in s.transports:
                    info.add_metric([s.src, s.dst, s.name, t], 1)
        yield info
        owners = run.owners.values()
        yield self._counter("flowmap_owner_in_bytes", "Payload bytes the owner received",
                            ["owner"], (((o.name,), o.bytes_in) for o in owners), ended)
        yield self._counter("flowmap_owner_out_bytes", "Payload bytes the owner sent",
                            ["owner"], (((o.name,), o.bytes_out) for o in owners), ended)
        values = GaugeMetricFamily("flowmap_recorded_value",
                                   "The last value the program recorded under the name "
                                   "(flowmap.counter)", labels=["counter"])
        pin = self.pins.setdefault("flowmap_recorded_value", _Pinned((OTHER,)))
        for c in run.counters.values():
            if pin.label((c.name,)) != pin.other:  # a last value does not sum: past the cap, none
                values.add_metric([c.name], c.last)
        yield values
        h = run.health
        yield self._counter("flowmap_hops", "Hops recorded in the run", [],
                            [((), run.num_hops)], False)
        yield GaugeMetricFamily("flowmap_processes", "Processes traced (shards read)",
                                value=len(run.shards))
        yield GaugeMetricFamily("flowmap_steps", "Training steps seen", value=run.step_count)
        yield self._counter("flowmap_tracer_errors", "Internal errors the tracers counted", [],
                            [((), h.tracer_errors)], False)
        yield self._counter("flowmap_dropped_records",
                            "Records the reader skipped: bad or over-long lines", [],
                            [((), h.bad_lines)], False)
        yield GaugeMetricFamily("flowmap_truncated_shards",
                                "Shards not closed (yet): still written, or cut short",
                                value=len(h.truncated_shards))
        yield self._counter("flowmap_items_dropped", "Items the program dropped", ["reason"],
                            (((reason,), n) for reason, n in sorted(run.items.dropped.items())),
                            ended)
        states = GaugeMetricFamily("flowmap_run_state",
                                   "1 for the run's state: running, exited, cut short, removed",
                                   labels=["state"])
        for one in STATES:
            states.add_metric([one.replace(" ", "_")], 1 if one == state else 0)
        yield states
        if frame.fresh_s:
            yield GaugeMetricFamily("flowmap_last_event_age_seconds",
                                    "Seconds since the watch last read new events of the run",
                                    value=max(0.0, time.time() - frame.fresh_s))


def registry(frame: Callable[[], Frame | None]) -> CollectorRegistry:
    """A registry of the run's metrics only (no process or platform collectors)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(RunCollector(frame))
    return reg
