"""The one rule for a group id used by another group type (Kafka's Group.type checks).

Every group object in the shard's `groups` dict has `.type` ("classic", "consumer" or
"share"). A protocol that finds a group of another type under its id answers with the error
Kafka gives for that API: JoinGroup INCONSISTENT_GROUP_PROTOCOL, SyncGroup and Heartbeat
UNKNOWN_MEMBER_ID, the KIP-848 heartbeats GROUP_ID_NOT_FOUND. Classic and consumer groups
of the consumer protocol are the exception: the shard routes the classic APIs of a consumer
group's members to consumer_classic.py, and migration.py converts one type into the other.
"""
from __future__ import annotations

from ..errors import Errors, KafkaError

__all__ = ["find_group"]


def find_group(groups: dict, group_id: str, group_type: str, mismatch: Errors = Errors.GROUP_ID_NOT_FOUND):
    """The group of `group_type` named `group_id`, or None if there is none; raises
    KafkaError(mismatch) when the id belongs to a group of another type."""
    group = groups.get(group_id)
    if group is not None and group.type != group_type:
        raise KafkaError(mismatch, f"group {group_id} is a {group.type} group, not a {group_type} group")
    return group
