"""Topic metadata (the controller's shard) and the data path of one topic partition."""
