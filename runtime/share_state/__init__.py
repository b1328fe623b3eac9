"""The share-group state side (Kafka's share coordinator over __share_group_state): the
shard, its records and the combining of state batches. The SharePartition side is
runtime.share."""
