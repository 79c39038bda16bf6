"""The writing half of the trace format (`flowmap.trace_format`), the mirror of the reader.

`TraceWriter` is the one encoder: every line kind a shard holds is written by
it, with its string, schema and storage interning. The tracer, the in-process
folder of `--aggregate`, the transports and the tests' run builder all write
through it. `HopTally` is the per-seam, per-step accumulator that both the
in-process folder and the reader's fold add hops into.
"""

from flowmap.writer.encoder import TraceWriter, encode_line, items_json
from flowmap.writer.tally import HopTally

__all__ = ["HopTally", "TraceWriter", "encode_line", "items_json"]
