"""Actor names: ``shoal/<kind>/<key>`` in the deployment's namespace."""
from __future__ import annotations

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


def partition_leader(topic: str, partition: int) -> str:
    return f"shoal/partition-leader/{topic}-{partition}"


def gateway(node: int) -> str:
    return f"shoal/gateway/{node}"


def share_partition(group_id: str, topic: str, partition: int) -> str:
    return f"shoal/share-partition/{group_id}/{topic}-{partition}"


def client(kind: str, client_id: str) -> str:
    return f"shoal/{kind}-client/{client_id}"
