"""Actor names: ``shoal/<kind>/<key>`` in the deployment's namespace, and the one way to find
the coordinator of a key (Kafka's FindCoordinator)."""
from __future__ import annotations

import enum
from typing import Callable, Mapping

from runtime.hashing import partition_for, share_coordinator_key
from runtime.topics.metadata import PARTITION_HOSTS_KEY

from .config import DEFAULTS

__all__ = ["CONTROLLER", "DEFAULT_NAMESPACE", "NAMESPACE_KEY", "CoordinatorType", "group_coordinator",
           "share_coordinator", "transaction_coordinator", "partition_host", "partition_host_of", "every_partition_host",
           "partition_host_count", "PARTITION_HOSTS_KEY", "share_partition", "client",
           "coordinator_count", "coordinator_partition", "find_coordinator", "every_coordinator",
           "share_coordinator_key"]

CONTROLLER = "shoal/controller/0"
DEFAULT_NAMESPACE = "shoal"
# The config key under which the Cluster tells its actors their namespace, so that an actor
# that calls others (a transaction coordinator writing markers) finds them there.
NAMESPACE_KEY = "shoal.namespace"


def group_coordinator(partition: int) -> str:
    return f"shoal/group-coordinator/{partition}"


def share_coordinator(partition: int) -> str:
    return f"shoal/share-coordinator/{partition}"


def transaction_coordinator(partition: int) -> str:
    return f"shoal/transaction-coordinator/{partition}"


def partition_host(index: int) -> str:
    return f"shoal/partition-host/{index}"


def partition_host_count(config: Mapping) -> int:
    return max(int(config.get(PARTITION_HOSTS_KEY, 1)), 1)


def partition_host_index(topic: str, partition: int, config: Mapping) -> int:
    """The host that leads the topic partition: a topic's partitions go round the hosts from
    a start its name picks, as Kafka's replica assignment goes round the brokers, so that the
    partitions of one topic spread over every host and node, and every caller finds a
    partition's host as it finds a group's coordinator, without asking."""
    count = partition_host_count(config)
    return (partition_for(topic, count) + partition) % count


def partition_host_of(topic: str, partition: int, config: Mapping) -> str:
    """The name of the partition host that leads the topic partition."""
    return partition_host(partition_host_index(topic, partition, config))


def every_partition_host(config: Mapping) -> list[str]:
    return [partition_host(i) for i in range(partition_host_count(config))]


def gateway(node: int) -> str:
    return f"shoal/gateway/{node}"


SHARE_PARTITION_PREFIX = "shoal/share-partition/"


def share_partition(group_id: str, topic: str, partition: int) -> str:
    return f"{SHARE_PARTITION_PREFIX}{group_id}/{topic}-{partition}"


def parse_share_partition(name: str) -> tuple[str, str, int] | None:
    """(group id, topic, partition) of a SharePartition actor's name; None for another name.
    A group id may hold '/', a topic name never does."""
    if not name.startswith(SHARE_PARTITION_PREFIX):
        return None
    group_id, sep, topic_partition = name[len(SHARE_PARTITION_PREFIX):].rpartition("/")
    topic, dash, partition = topic_partition.rpartition("-")
    if not (sep and dash and partition.isdigit()):
        return None
    return group_id, topic, int(partition)


def client(kind: str, client_id: str) -> str:
    return f"shoal/{kind}-client/{client_id}"


class CoordinatorType(enum.IntEnum):
    """Kafka's FindCoordinator key types."""
    GROUP = 0  # a group id
    TRANSACTION = 1  # a transactional id
    SHARE = 2  # share_coordinator_key(group id, topic id, partition)


# key type -> (the actor name of a state partition, the config that counts the partitions)
_COORDINATORS: dict[CoordinatorType, tuple[Callable[[int], str], str]] = {
    CoordinatorType.GROUP: (group_coordinator, "offsets.topic.num.partitions"),
    CoordinatorType.TRANSACTION: (transaction_coordinator, "transaction.state.log.num.partitions"),
    CoordinatorType.SHARE: (share_coordinator, "share.coordinator.state.topic.num.partitions"),
}


def coordinator_count(key_type: CoordinatorType, config: Mapping) -> int:
    """How many coordinators of the type the deployment runs (its state partitions)."""
    count_key = _COORDINATORS[key_type][1]
    return int(config.get(count_key, DEFAULTS[count_key]))


def coordinator_partition(key_type: CoordinatorType, key: str, config: Mapping) -> int:
    """The state partition that owns `key`."""
    return partition_for(key, coordinator_count(key_type, config))


def find_coordinator(key_type: CoordinatorType, key: str, config: Mapping) -> str:
    """The name of the coordinator actor that owns `key`."""
    return _COORDINATORS[key_type][0](coordinator_partition(key_type, key, config))


def every_coordinator(key_type: CoordinatorType, config: Mapping) -> list[str]:
    """The names of all coordinators of the type, by partition (for list requests)."""
    name_of = _COORDINATORS[key_type][0]
    return [name_of(p) for p in range(coordinator_count(key_type, config))]
