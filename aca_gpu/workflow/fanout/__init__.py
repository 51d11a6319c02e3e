"""Fan-out: one job, one execution per shard (`acagpu run --shards/--map`, `acagpu.map`)."""
