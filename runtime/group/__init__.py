"""The group coordinator: classic, consumer (KIP-848) and share groups and committed offsets,
one shard (runtime.group.shard) per __consumer_offsets partition. Nothing is imported here:
a client imports only the protocol pieces it shares with the coordinator (consumer_protocol),
not the whole shard."""
