"""Records of the group log (Kafka's __consumer_offsets), with Kafka's record type ids.

Each record type keeps Kafka's key and value fields (OffsetCommitKey/Value,
GroupMetadataKey/Value). A value of None is a tombstone. Other group protocols append their
record classes at the end of this module.
"""
from __future__ import annotations

from typing import NamedTuple

from ..codec import Record, register

__all__ = [
    "OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue", "GroupMetadataMember",
    "offset_commit_record", "offset_commit_tombstone", "group_metadata_record", "group_metadata_tombstone",
]


class OffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int


class OffsetCommitValue(NamedTuple):
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: expiry follows offsets.retention.minutes (no per-commit retention)


class GroupMetadataKey(NamedTuple):
    group: str


class GroupMetadataMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


class GroupMetadataValue(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[GroupMetadataMember, ...]
    __nested__ = {"members": [GroupMetadataMember]}


register(1, OffsetCommitKey, OffsetCommitValue)
register(2, GroupMetadataKey, GroupMetadataValue)


def offset_commit_record(group: str, topic: str, partition: int, offset: int, leader_epoch: int, metadata: str,
                         commit_timestamp: int, expire_timestamp: int = -1) -> Record:
    return Record(OffsetCommitKey(group, topic, partition),
                  OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp))


def offset_commit_tombstone(group: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group, topic, partition))


def group_metadata_record(group: str, protocol_type: str, generation: int, protocol: str | None,
                          leader: str | None, current_state_timestamp: int,
                          members: tuple[GroupMetadataMember, ...] | list = ()) -> Record:
    return Record(GroupMetadataKey(group),
                  GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp,
                                     tuple(members)))


def group_metadata_tombstone(group: str) -> Record:
    return Record(GroupMetadataKey(group))
