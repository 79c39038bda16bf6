"""Read: shard files in, plain records out. The one place that knows the trace grammar on the way in.

`reader` turns one shard's lines into a `Shard` of records (`events`),
checking each event against the format (`validate`) and folding hops past
the detail window (`fold`); `folded` and `halves` build the records of folded
and transport-half events; `shards` finds and reads every shard of a run;
`records` puts them on one clock; `merge` copies runs from several hosts
into one; `run_meta` reads `run.json`. Nothing here aggregates, and nothing
imports torch or the model above it.
"""
