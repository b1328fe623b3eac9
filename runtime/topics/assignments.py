"""Manual replica assignments (CreateTopics' and CreatePartitions'), checked as Kafka's
controller checks them (ReplicationControlManager's validateManualPartitionAssignment), with
its error names and words.

shoal keeps one replica of each partition, on the broker that leads it, so an assignment
names one broker: where the partition's leader is placed.
"""
from __future__ import annotations

from ..errors import Errors, KafkaError

__all__ = ["check_replicas", "topic_assignment", "added_partitions_assignment"]

REPLICATION_FACTOR = 1  # every partition shoal has


def _refuse(message: str) -> KafkaError:
    return KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT, message)


def check_replicas(replicas, brokers, replication_factor: int | None) -> None:
    """Raises INVALID_REPLICA_ASSIGNMENT unless `replicas` is a non-empty list of distinct
    registered `brokers` of `replication_factor` replicas (None: any number)."""
    if not replicas:
        raise _refuse("The manual partition assignment includes an empty replica list.")
    previous = None
    for broker in sorted(replicas):  # ascending, so the message names the least offender
        if broker not in brokers:
            raise _refuse(f"The manual partition assignment includes broker {broker}, but no such broker is "
                          f"registered.")
        if broker == previous:
            raise _refuse(f"The manual partition assignment includes the broker {broker} more than once.")
        previous = broker
    if replication_factor is not None and len(replicas) != replication_factor:
        raise _refuse(f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but "
                      f"this is not consistent with previous partitions, which have {replication_factor} "
                      f"replica(s).")


def _one_replica(replicas) -> int:
    if len(replicas) != REPLICATION_FACTOR:
        raise _refuse(f"The manual partition assignment names {len(replicas)} replicas; shoal keeps one replica of "
                      f"each partition (no replication yet)")
    return replicas[0]


def topic_assignment(assignments, num_partitions: int, replication_factor: int, brokers) -> dict[int, int]:
    """A new topic's assignments ((partition index, broker ids) pairs) as partition -> leader
    broker. Kafka takes them only with the counts left to it (-1), one per partition, numbered
    0 to n-1, every partition with as many replicas as the first."""
    if replication_factor != -1:
        raise KafkaError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, but replication "
                                                 "factor was not set to -1.")
    if num_partitions != -1:
        raise KafkaError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions "
                                                 "was not set to -1.")
    leaders: dict[int, int] = {}
    factor = None
    for index, replicas in assignments:
        if index in leaders:
            raise _refuse(f"Found multiple manual partition assignments for partition {index}")
        check_replicas(replicas, brokers, factor)
        factor = len(replicas)
        leaders[index] = _one_replica(replicas)
    if sorted(leaders) != list(range(len(leaders))):
        raise _refuse("partitions should be a consecutive 0-based integer sequence")
    return leaders


def added_partitions_assignment(assignments, current: int, count: int, brokers) -> dict[int, int]:
    """The new partitions' assignments of a topic of `current` partitions grown to `count`,
    as partition -> leader broker: one per added partition, each with as many replicas as
    the partitions before it."""
    added = count - current
    if len(assignments) != added:
        raise _refuse(f"Attempted to add {added} additional partition(s), but only {len(assignments)} "
                      f"assignment(s) were specified.")
    leaders = {}
    for index, replicas in enumerate(assignments, start=current):
        check_replicas(replicas, brokers, REPLICATION_FACTOR)
        leaders[index] = replicas[0]
    return leaders
