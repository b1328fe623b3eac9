"""The server side: the shard host and the coordinators, the controller, partition leaders and SharePartitions."""
