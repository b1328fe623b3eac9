"""Records of the share-group state log (Kafka's __share_group_state).

The state of one share-partition, keyed by (group, topic id, partition), is a full
ShareSnapshot followed by ShareUpdate deltas. Loading applies the newest snapshot and then
merges each later update into it; compaction keeps exactly that tail (``compaction="delta"``).
"""
from __future__ import annotations

import enum
from typing import NamedTuple

from ..codec import Record, register

__all__ = [
    "RecordState", "PersisterStateBatch",
    "ShareSnapshotKey", "ShareSnapshotValue", "ShareUpdateKey", "ShareUpdateValue",
    "share_snapshot_record", "share_update_record", "share_state_tombstones",
]


class RecordState(enum.IntEnum):
    """The delivery state of an in-flight record, with Kafka's wire codes (3 is unused)."""
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class PersisterStateBatch(NamedTuple):
    """A run of offsets [first_offset, last_offset] sharing one state and delivery count."""
    first_offset: int
    last_offset: int
    delivery_state: int  # a RecordState code
    delivery_count: int


class ShareSnapshotKey(NamedTuple):
    group_id: str
    topic_id: str
    partition: int


class ShareSnapshotValue(NamedTuple):
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[PersisterStateBatch, ...]
    __nested__ = {"state_batches": [PersisterStateBatch]}


class ShareUpdateKey(NamedTuple):
    group_id: str
    topic_id: str
    partition: int


class ShareUpdateValue(NamedTuple):
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[PersisterStateBatch, ...]
    __nested__ = {"state_batches": [PersisterStateBatch]}


register(20, ShareSnapshotKey, ShareSnapshotValue)
register(21, ShareUpdateKey, ShareUpdateValue, compaction="delta", snapshot_of=20)


def share_snapshot_record(group_id: str, topic_id: str, partition: int,
                          value: ShareSnapshotValue) -> Record:
    return Record(ShareSnapshotKey(group_id, topic_id, partition), value)


def share_update_record(group_id: str, topic_id: str, partition: int,
                        value: ShareUpdateValue) -> Record:
    return Record(ShareUpdateKey(group_id, topic_id, partition), value)


def share_state_tombstones(group_id: str, topic_id: str, partition: int) -> list[Record]:
    """The records that delete a share partition's state: a tombstone of its snapshot key, as
    in Kafka. The updates before it fall to delta compaction, which keeps only what follows
    the newest record of the snapshot type."""
    return [Record(ShareSnapshotKey(group_id, topic_id, partition))]
