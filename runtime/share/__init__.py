"""The SharePartition side of share groups (Kafka's kafka.server.share): the in-flight
records of one group on one topic partition, their reads from the leader, the group's
members as a SharePartition knows them, and share sessions. The state side is
runtime.share_state."""
