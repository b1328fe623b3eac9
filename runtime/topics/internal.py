"""Kafka's internal topics: the coordinators' logs (Topic.GROUP_METADATA_TOPIC_NAME and the
others), and the folder name of a partition's log, internal or not."""
from __future__ import annotations

__all__ = ["OFFSETS_TOPIC", "TRANSACTION_STATE_TOPIC", "SHARE_GROUP_STATE_TOPIC", "CLUSTER_METADATA_TOPIC",
           "is_internal", "log_name"]

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"


def is_internal(name: str) -> bool:
    """Names starting with "__" belong to the coordinators' logs; users may not create them,
    and a regex subscription never matches them."""
    return name.startswith("__")


def log_name(topic: str, partition: int) -> str:
    """The folder of a partition's log under the data directory, e.g. "__consumer_offsets-3"."""
    return f"{topic}-{partition}"
