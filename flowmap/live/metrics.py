"""`/metrics`: the watched run in the Prometheus text format, through `prometheus_client`.

A custom collector reads the latest frame of the one `Watch` (never the
shards): a scrape costs a walk over seams and owners, whatever the run's
length. Per-seam counters are the run's per-seam figures, so at the end they
equal `flowmap report`'s; a seam that moved by several transports has them
joined in its `transport` label, as the report lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from flowmap.live.watch import Frame

SEAM_LABELS = ["src", "dst", "name", "transport"]


class RunCollector(Collector):
    """Collects the metrics of the frame `frame()` returns (None: nothing read yet)."""

    def __init__(self, frame: Callable[[], Frame | None]) -> None:
        self.frame = frame

    def collect(self) -> Iterator[Metric]:
        frame = self.frame()
        if frame is None:
            return
        run = frame.run
        seam_bytes = CounterMetricFamily("flowmap_seam_bytes", "Payload bytes that crossed the seam",
                                         labels=SEAM_LABELS)
        seam_hops = CounterMetricFamily("flowmap_seam_hops", "Hops of the seam", labels=SEAM_LABELS)
        for s in run.seams.values():
            labels = [s.src, s.dst, s.name, ",".join(s.transports)]
            seam_bytes.add_metric(labels, s.total_bytes)
            seam_hops.add_metric(labels, s.hops)
        yield seam_bytes
        yield seam_hops
        owner_in = CounterMetricFamily("flowmap_owner_in_bytes", "Payload bytes the owner received",
                                       labels=["owner"])
        owner_out = CounterMetricFamily("flowmap_owner_out_bytes", "Payload bytes the owner sent",
                                        labels=["owner"])
        for o in run.owners.values():
            owner_in.add_metric([o.name], o.bytes_in)
            owner_out.add_metric([o.name], o.bytes_out)
        yield owner_in
        yield owner_out
        counters = GaugeMetricFamily("flowmap_counter", "The last value of the run's counter",
                                     labels=["counter"])
        for c in run.counters.values():
            counters.add_metric([c.name], c.last)
        yield counters
        h = run.health
        yield CounterMetricFamily("flowmap_hops", "Hops recorded in the run", value=run.num_hops)
        yield GaugeMetricFamily("flowmap_processes", "Processes traced (shards read)",
                                value=len(run.shards))
        yield GaugeMetricFamily("flowmap_steps", "Training steps seen", value=run.step_count)
        yield CounterMetricFamily("flowmap_tracer_errors", "Internal errors the tracers counted",
                                  value=h.tracer_errors)
        yield CounterMetricFamily("flowmap_dropped_records",
                                  "Records the reader skipped: bad or over-long lines",
                                  value=h.bad_lines)
        yield GaugeMetricFamily("flowmap_truncated_shards",
                                "Shards not closed (yet): still written, or cut short",
                                value=len(h.truncated_shards))
        dropped = CounterMetricFamily("flowmap_items_dropped", "Items the program dropped",
                                      labels=["reason"])
        for reason, n in sorted(run.items.dropped.items()):
            dropped.add_metric([reason], n)
        yield dropped


def registry(frame: Callable[[], Frame | None]) -> CollectorRegistry:
    """A registry of the run's metrics only (no process or platform collectors)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(RunCollector(frame))
    return reg
