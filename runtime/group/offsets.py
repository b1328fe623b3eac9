"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and offset expiry (Kafka's
OffsetMetadataManager).

Offsets are hard state: only `replay` of OffsetCommit records changes them. Validation of
who may commit belongs to the group (`group.validate_offset_commit`, Kafka's Group
interface), so consumer groups plug in without changes here.

Pending commits: the runtime replays a commit at once and makes it durable with its batch.
Each offset remembers the log offset of its record, so a fetch that passes the log's
durable end (`pending_from`) can tell a commit that is not durable yet and answer
UNSTABLE_OFFSET_COMMIT for it when the request requires stable offsets. A fetch run as a
read is answered only once what it saw is durable, so it needs no such check.
"""
from __future__ import annotations

from typing import NamedTuple

from ..errors import Errors, KafkaError, raise_if
from ..messages.group import (
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
)
from .classic_group import ClassicGroup
from .records import OffsetCommitKey, OffsetCommitValue, offset_commit_record, offset_commit_tombstone

__all__ = ["OffsetAndMetadata", "OffsetMetadataManager"]

INVALID_OFFSET = -1


class OffsetAndMetadata(NamedTuple):
    committed_offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int  # -1 unless the commit asked for its own retention
    record_offset: int  # where its record is in the log


class OffsetMetadataManager:
    def __init__(self, config: dict, groups: dict) -> None:
        self.groups = groups
        self.metadata_max_bytes = int(config.get("offset.metadata.max.bytes", 4096))
        self.retention_ms = int(config.get("offsets.retention.minutes", 10080)) * 60_000
        # group -> topic -> partition -> OffsetAndMetadata
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # (group, topic, partition) -> producer id -> offset of an open transaction (txn_offsets.py)
        self.pending_txn: dict[tuple[str, str, int], dict[int, OffsetAndMetadata]] = {}

    # ------------------------------------------------------------------ OffsetCommit

    def validate_offset_commit(self, request: OffsetCommitRequest, transactional: bool = False):
        """The group the commit goes to (None: a simple group created by the commit);
        `transactional` for a TxnOffsetCommit's."""
        raise_if(not request.group_id, Errors.INVALID_GROUP_ID, "empty group id")
        group = self.groups.get(request.group_id)
        if group is None:
            # a consumer without group management (or the admin client) may commit to a
            # group that does not exist; anyone else is too late
            raise_if(request.generation_id_or_member_epoch >= 0, Errors.GROUP_ID_NOT_FOUND,
                     f"group {request.group_id} not found")
            return None
        group.validate_offset_commit(request.member_id, request.group_instance_id,
                                     request.generation_id_or_member_epoch, transactional)
        return group

    def commit_offset(self, request: OffsetCommitRequest, now_ms: int) -> tuple[list, OffsetCommitResponse]:
        """Records and response of a validated commit: metadata over offset.metadata.max.bytes
        fails its partition alone."""
        records = []
        topics = []
        too_large = Errors.OFFSET_METADATA_TOO_LARGE.code
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                metadata = p.committed_metadata
                if metadata is not None and len(metadata) > self.metadata_max_bytes:
                    partitions.append(OffsetCommitResponsePartition(p.partition_index, too_large))
                    continue
                partitions.append(OffsetCommitResponsePartition(p.partition_index))
                records.append(offset_commit_record(request.group_id, topic.name, p.partition_index,
                                                    p.committed_offset, p.committed_leader_epoch, metadata or "",
                                                    now_ms))
            topics.append(OffsetCommitResponseTopic(topic.name, tuple(partitions)))
        return records, OffsetCommitResponse(tuple(topics))

    # ------------------------------------------------------------------ OffsetFetch

    def fetch(self, request: OffsetFetchRequest, pending_from: int | None = None) -> OffsetFetchResponse:
        return OffsetFetchResponse(tuple(self._fetch_group(g, request.require_stable, pending_from)
                                         for g in request.groups))

    def _fetch_group(self, request: OffsetFetchRequestGroup, require_stable: bool,
                     pending_from: int | None) -> OffsetFetchResponseGroup:
        group_id = request.group_id
        group = self.groups.get(group_id)
        try:
            raise_if(group is None, Errors.GROUP_ID_NOT_FOUND, group_id)
            group.validate_offset_fetch(request.member_id, request.member_epoch)
        except KafkaError as e:
            if e.error is not Errors.GROUP_ID_NOT_FOUND:
                return OffsetFetchResponseGroup(group_id, error_code=e.code)
            group = None
        offsets = self.offsets.get(group_id, {}) if group is not None else {}
        unstable = require_stable and pending_from is not None

        def answer(topic: str, partition: int, o: OffsetAndMetadata | None) -> OffsetFetchResponsePartitions:
            if (unstable and o is not None and o.record_offset >= pending_from) or (
                    require_stable and (group_id, topic, partition) in self.pending_txn):
                return OffsetFetchResponsePartitions(partition, error_code=Errors.UNSTABLE_OFFSET_COMMIT.code)
            if o is None:
                return OffsetFetchResponsePartitions(partition)
            return OffsetFetchResponsePartitions(partition, o.committed_offset, o.leader_epoch, o.metadata)

        if request.topics is None:
            topics = tuple(
                OffsetFetchResponseTopics(topic, tuple(answer(topic, p, o) for p, o in sorted(parts.items())))
                for topic, parts in sorted(offsets.items()))
        else:
            topics = tuple(
                OffsetFetchResponseTopics(t.name, tuple(answer(t.name, p, offsets.get(t.name, {}).get(p))
                                                        for p in t.partition_indexes))
                for t in request.topics)
        return OffsetFetchResponseGroup(group_id, topics)

    # ------------------------------------------------------------------ OffsetDelete

    def delete_offsets(self, request: OffsetDeleteRequest) -> tuple[list, OffsetDeleteResponse]:
        raise_if(not request.group_id, Errors.INVALID_GROUP_ID, "empty group id")
        group = self.groups.get(request.group_id)
        raise_if(group is None, Errors.GROUP_ID_NOT_FOUND, f"group {request.group_id} not found")
        group.validate_offset_delete()
        committed = self.offsets.get(request.group_id, {})
        records = []
        topics = []
        for topic in request.topics:
            if group.is_subscribed_to_topic(topic.name):
                error = Errors.GROUP_SUBSCRIBED_TO_TOPIC.code
                partitions = tuple(OffsetDeleteResponsePartition(p.partition_index, error) for p in topic.partitions)
            else:
                partitions = tuple(OffsetDeleteResponsePartition(p.partition_index) for p in topic.partitions)
                records.extend(offset_commit_tombstone(request.group_id, topic.name, p.partition_index)
                               for p in topic.partitions if p.partition_index in committed.get(topic.name, {}))
            topics.append(OffsetDeleteResponseTopic(topic.name, partitions))
        return records, OffsetDeleteResponse(topics=tuple(topics))

    def delete_all_offsets(self, group_id: str) -> list:
        return [offset_commit_tombstone(group_id, topic, p)
                for topic, parts in sorted(self.offsets.get(group_id, {}).items()) for p in sorted(parts)]

    # ------------------------------------------------------------------ expiry

    def expire_offsets(self, group_id: str, now_ms: int, records: list) -> bool:
        """Append tombstones for the group's expired offsets; True when none are left."""
        by_topic = self.offsets.get(group_id)
        if not by_topic:
            return True
        base = self.groups[group_id].offset_expiration_base()
        if base is None:
            return False
        group = self.groups[group_id]
        all_expired = True
        for topic, parts in sorted(by_topic.items()):
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for partition, o in sorted(parts.items()):
                if o.expire_timestamp != -1:
                    expired = now_ms >= o.expire_timestamp  # a commit that chose its own retention
                else:
                    expired = now_ms - base(o) >= self.retention_ms
                if expired:
                    records.append(offset_commit_tombstone(group_id, topic, partition))
                else:
                    all_expired = False
        return all_expired

    # ------------------------------------------------------------------ replay

    def replay_offset_commit(self, offset: int, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        if value is None:
            parts = self.offsets.get(key.group, {}).get(key.topic)
            if parts is not None:
                parts.pop(key.partition, None)
                if not parts:
                    del self.offsets[key.group][key.topic]
                    if not self.offsets[key.group]:
                        del self.offsets[key.group]
            return
        if key.group not in self.groups:
            # offsets without membership: a "simple" classic group with no protocol type
            self.groups[key.group] = ClassicGroup(key.group, current_state_timestamp=None)
        self.offsets.setdefault(key.group, {}).setdefault(key.topic, {})[key.partition] = OffsetAndMetadata(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp, offset)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id))
