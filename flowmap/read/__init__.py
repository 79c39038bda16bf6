"""Reading runs: shards -> records, and a run still being written (`incremental`)."""
