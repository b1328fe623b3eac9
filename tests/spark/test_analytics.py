"""Reports over a data directory: lag against offsets committed through the group
coordinator, share-partition state, membership history."""
from __future__ import annotations

import pytest

from runtime.codec import Record, encode_records
from runtime.group.records import (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue,
                                   ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue,
                                   GroupMetadataMember, group_metadata_record, group_metadata_tombstone)
from runtime.group.shard import GroupCoordinatorShard
from runtime.log import FileLog, LogConfig
from runtime.messages.group import OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic
from runtime.share_state.records import (PersisterStateBatch, ShareSnapshotKey, ShareSnapshotValue, ShareUpdateValue,
                                   share_snapshot_record, share_update_record)
from runtime.testing import ShardHarness
from runtime.topics.data import encode_records as encode_data
from spark_bridge.analytics import LAG_COLUMNS, consumer_group_lag, export_report, membership_history, \
    share_group_state

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


def commit(h: ShardHarness, group: str, topic: str, offsets: dict[int, int]) -> None:
    request = OffsetCommitRequest(group, (OffsetCommitRequestTopic(topic, tuple(
        OffsetCommitRequestPartition(p, o) for p, o in offsets.items())),))
    response = h.call(lambda s, now: s.offset_commit(request, now))
    assert all(p.error_code == 0 for t in response.topics for p in t.partitions)


def append(directory: str, records: list, timestamp: int) -> None:
    log = FileLog(directory, LogConfig(fsync=False))
    log.append(encode_records(records), len(records), timestamp)
    log.flush()
    log.close()


def test_lag_report_against_committed_offsets(spark, tmp_path):
    for partition, n in ((0, 10), (1, 4)):
        log = FileLog(str(tmp_path / f"events-{partition}"), LogConfig(fsync=False))
        for i in range(n):
            log.append(encode_data([(T0, None, b"x", [])]), 1, T0)
        log.flush()
        log.close()
    h = ShardHarness(str(tmp_path / "__consumer_offsets-7"), GroupCoordinatorShard, name="__consumer_offsets-7",
                     partition=7, now_ms=T0)
    commit(h, "billing", "events", {0: 3, 1: 1})
    commit(h, "billing", "events", {0: 6})
    commit(h, "audit", "events", {1: 4})
    commit(h, "audit", "gone", {0: 2})  # a topic with no log here
    h.runtime.close()

    rows = [tuple(r) for r in consumer_group_lag(spark, str(tmp_path)).collect()]
    assert rows == [("audit", "events", 1, 4, 4, 0), ("audit", "gone", 0, 2, None, None),
                    ("billing", "events", 0, 6, 10, 4), ("billing", "events", 1, 1, 4, 3)]

    out = tmp_path / "reports"
    export_report(spark, "lag", str(tmp_path), str(out))
    exported = spark.read.parquet(str(out / "lag"))
    assert tuple(exported.columns) == LAG_COLUMNS
    assert sorted((tuple(r) for r in exported.collect()), key=lambda r: r[:3]) == rows


def test_share_state_and_membership_history(spark, tmp_path):
    state = str(tmp_path / "__share_group_state-0")
    append(state, [share_snapshot_record("sg", "tid", 0, ShareSnapshotValue(
        0, 1, 0, 100, 0, T0, T0, (PersisterStateBatch(100, 109, 0, 1),)))], T0)
    append(state, [share_update_record("sg", "tid", 0, ShareUpdateValue(
        0, 0, -1, 0, (PersisterStateBatch(100, 103, 2, 1), PersisterStateBatch(104, 104, 4, 5))))], T0 + 1)
    append(state, [share_update_record("sg", "tid", 0, ShareUpdateValue(
        0, 3, 102, 0, (PersisterStateBatch(105, 106, 1, 2),)))], T0 + 2)
    append(state, [share_snapshot_record("sg", "tid", 1, ShareSnapshotValue(
        0, 1, 0, 0, 0, T0, T0, (PersisterStateBatch(0, 0, 0, 1),)))], T0 + 3)
    append(state, [Record(ShareSnapshotKey("sg", "tid", 1))], T0 + 4)  # its state is deleted

    rows = [r.asDict() for r in share_group_state(spark, str(tmp_path)).collect()]
    assert rows == [{"group_id": "sg", "topic_id": "tid", "partition": 0, "state_epoch": 1, "leader_epoch": 3,
                     "start_offset": 102, "in_flight": 8, "available": 3, "acquired": 2, "acknowledged": 2,
                     "archived": 1, "max_delivery_count": 5, "delivery_counts": '{"1": 5, "2": 2, "5": 1}',
                     "last_offset": 2}]

    offsets = str(tmp_path / "__consumer_offsets-0")

    def member(m):
        return GroupMetadataMember(m, None, "client", "/127.0.0.1", 30000, 10000, b"", b"")

    append(offsets, [group_metadata_record("cg", "consumer", 1, "range", "a", T0, [member("a")])], T0)
    append(offsets, [group_metadata_record("cg", "consumer", 2, "range", "a", T0, [member("a"), member("b")])], T0 + 1)
    append(offsets, [group_metadata_record("cg", "consumer", 3, "range", "b", T0, [member("b")])], T0 + 2)
    append(offsets, [group_metadata_tombstone("cg")], T0 + 3)
    append(offsets, [
        Record(ConsumerGroupMemberMetadataKey("kg", "m1"),
               ConsumerGroupMemberMetadataValue(None, None, "c", "h", ("events",), None)),
        Record(ConsumerGroupCurrentMemberAssignmentKey("kg", "m1"),
               ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, (), ())),
        Record(ConsumerGroupCurrentMemberAssignmentKey("kg", "m1"),
               ConsumerGroupCurrentMemberAssignmentValue(2, 1, 0, (), ())),
        Record(ConsumerGroupMemberMetadataKey("kg", "m1")),
    ], T0 + 4)

    events = [tuple(r)[1:] for r in membership_history(spark, str(tmp_path)).collect()]
    assert events == [
        ("cg", "classic", "a", "join", 1, 0, T0),
        ("cg", "classic", "a", "epoch", 2, 1, T0 + 1),
        ("cg", "classic", "b", "join", 2, 1, T0 + 1),
        ("cg", "classic", "a", "leave", 2, 2, T0 + 2),
        ("cg", "classic", "b", "epoch", 3, 2, T0 + 2),
        ("cg", "classic", "b", "leave", 3, 3, T0 + 3),
        ("kg", "consumer", "m1", "join", None, 4, T0 + 4),
        ("kg", "consumer", "m1", "epoch", 1, 5, T0 + 4),
        ("kg", "consumer", "m1", "epoch", 2, 6, T0 + 4),
        ("kg", "consumer", "m1", "leave", 2, 7, T0 + 4),
    ]
