"""Transactional offset commits (TxnOffsetCommit) and the transaction markers that end them
(Kafka's pending transactional offsets in OffsetMetadataManager).

A transactional commit is validated like a plain one but written as PendingTxnOffsetCommit
records: the offsets are not committed until the transaction coordinator's marker arrives.
On a commit marker each pending offset becomes an OffsetCommit record, unless a later plain
commit of the same partition is already in the log; either marker tombstones the pending
records. Meanwhile OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for those
partitions (`OffsetMetadataManager.pending_txn`).
"""
from __future__ import annotations

from ..codec import Record
from ..errors import Errors
from ..messages.group import OffsetCommitRequest
from ..messages.txn import (TxnOffsetCommitRequest, TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition,
                            TxnOffsetCommitResponseTopic)
from .offsets import OffsetAndMetadata, OffsetMetadataManager
from .records import (PendingTxnOffsetCommitKey, PendingTxnOffsetCommitValue, offset_commit_record,
                      pending_txn_offset_commit_record, pending_txn_offset_commit_tombstone)

__all__ = ["TxnOffsetManager"]


class TxnOffsetManager:
    def __init__(self, offsets: OffsetMetadataManager) -> None:
        self.offsets = offsets
        # (group, topic, partition) -> producer id -> the pending offset; shared with the
        # offsets manager, whose require_stable fetches look here.
        self.pending = offsets.pending_txn
        self.by_producer: dict[int, set[tuple[str, str, int]]] = {}

    def txn_offset_commit(self, request: TxnOffsetCommitRequest, now_ms: int) -> tuple[list[Record],
                                                                                        TxnOffsetCommitResponse]:
        self.offsets.validate_offset_commit(OffsetCommitRequest(
            request.group_id, generation_id_or_member_epoch=request.generation_id, member_id=request.member_id,
            group_instance_id=request.group_instance_id), transactional=True)
        records = []
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                if len(metadata) > self.offsets.metadata_max_bytes:
                    partitions.append(TxnOffsetCommitResponsePartition(p.partition_index,
                                                                       Errors.OFFSET_METADATA_TOO_LARGE.code))
                    continue
                partitions.append(TxnOffsetCommitResponsePartition(p.partition_index))
                records.append(pending_txn_offset_commit_record(
                    request.group_id, topic.name, p.partition_index, request.producer_id,
                    PendingTxnOffsetCommitValue(p.committed_offset, p.committed_leader_epoch, metadata, now_ms,
                                                request.producer_epoch)))
            topics.append(TxnOffsetCommitResponseTopic(topic.name, tuple(partitions)))
        return records, TxnOffsetCommitResponse(tuple(topics))

    def complete(self, producer_id: int, commit: bool) -> list[Record]:
        """The records a transaction marker for producer_id writes (none for a retried one)."""
        records = []
        for group, topic, partition in sorted(self.by_producer.get(producer_id, ())):
            pending = self.pending[(group, topic, partition)][producer_id]
            committed = self.offsets.offsets.get(group, {}).get(topic, {}).get(partition)
            if commit and (committed is None or committed.record_offset < pending.record_offset):
                records.append(offset_commit_record(group, topic, partition, pending.committed_offset,
                                                    pending.leader_epoch, pending.metadata,
                                                    pending.commit_timestamp))
            records.append(pending_txn_offset_commit_tombstone(group, topic, partition, producer_id))
        return records

    def replay(self, offset: int, key: PendingTxnOffsetCommitKey, value: PendingTxnOffsetCommitValue | None) -> None:
        where = (key.group, key.topic, key.partition)
        if value is None:
            by_pid = self.pending.get(where, {})
            by_pid.pop(key.producer_id, None)
            if not by_pid:
                self.pending.pop(where, None)
            mine = self.by_producer.get(key.producer_id, set())
            mine.discard(where)
            if not mine:
                self.by_producer.pop(key.producer_id, None)
            return
        self.pending.setdefault(where, {})[key.producer_id] = OffsetAndMetadata(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, -1, offset)
        self.by_producer.setdefault(key.producer_id, set()).add(where)
