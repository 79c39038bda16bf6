"""Read: shard files in, plain records out. The one place that knows the trace grammar on the way in.

`reader` turns one shard's lines into a `Shard` of records (`events`),
checking each event against the format (`validate`) and folding hops past
the detail window (`fold`); `folded` builds the records of folded events,
reading their fields by name (`fields`), and `halves` joins the transport
halves; `shards` finds every shard of a run; `records` puts them
all on one clock (`Records`, what the model aggregates); `merge` copies runs
from several hosts into one; `run_meta` reads `run.json`; `incremental` reads a run, finished or still being written (`records` polls it once), feeding
what each shard appended since its last poll (`tail`: one shard) to the same feed
(`reader.ShardFeed`, whose hop lines `hop_lines` takes without decoding) and pairing halves by the same rules (`halves.pair`). Nothing here
aggregates, and nothing imports torch or the layers above.
"""
