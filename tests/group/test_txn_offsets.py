"""Transactional offset commits on the group coordinator shard: pending until the marker,
committed or discarded by it, unstable for require_stable fetches meanwhile."""
import pytest

from runtime.errors import Errors, KafkaError
from runtime.group.records import (OffsetCommitKey, OffsetCommitValue, PendingTxnOffsetCommitKey,
                                   PendingTxnOffsetCommitValue)
from runtime.messages.group import (OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
                                    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics)
from runtime.messages.txn import (TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition,
                                  TxnOffsetCommitRequestTopic, TxnOffsetCommitResponse,
                                  TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic)

from .helpers import harness

PID = 1000


def txn_commit(h, offset, pid=PID, group="g", metadata="m"):
    request = TxnOffsetCommitRequest("tx", group, pid, 0, topics=(TxnOffsetCommitRequestTopic(
        "t", (TxnOffsetCommitRequestPartition(0, offset, 3, metadata),)),))
    return h.call(lambda s, now: s.txn_offset_commit(request, now))


def fetch(h, stable=True, group="g"):
    request = OffsetFetchRequest((OffsetFetchRequestGroup(group, topics=(OffsetFetchRequestTopics("t", (0,)),)),),
                                 require_stable=stable)
    (partition,) = h.read(lambda s: s.offset_fetch(request)).groups[0].topics[0].partitions
    return partition.error_code, partition.committed_offset


def marker(h, commit, pid=PID):
    h.call(lambda s, now: s.complete_txn_offsets(pid, commit, now))


def test_offsets_are_pending_until_the_commit_marker(tmp_path):
    h = harness(tmp_path)
    start = h.end_offset
    assert txn_commit(h, 42) == TxnOffsetCommitResponse((TxnOffsetCommitResponseTopic(
        "t", (TxnOffsetCommitResponsePartition(0),)),))
    assert fetch(h) == (Errors.UNSTABLE_OFFSET_COMMIT.code, -1)
    assert fetch(h, stable=False) == (0, -1)
    marker(h, commit=True)
    assert fetch(h) == (0, 42)
    records = [r for _, r in h.records(start)]
    assert [type(r.key) for r in records] == [PendingTxnOffsetCommitKey, OffsetCommitKey, PendingTxnOffsetCommitKey]
    assert records[0].value == PendingTxnOffsetCommitValue(42, 3, "m", records[0].value.commit_timestamp, 0)
    assert records[1].value == OffsetCommitValue(42, 3, "m", records[0].value.commit_timestamp)
    assert records[2].value is None
    h.reload()
    assert fetch(h) == (0, 42)
    assert h.shard.offsets.pending_txn == {}


def test_an_abort_marker_discards_them_and_a_retried_marker_writes_nothing(tmp_path):
    h = harness(tmp_path)
    commit = OffsetCommitRequest("g", (OffsetCommitRequestTopic("t", (OffsetCommitRequestPartition(0, 7),)),))
    h.call(lambda s, now: s.offset_commit(commit, now))
    txn_commit(h, 42)
    marker(h, commit=False)
    assert fetch(h) == (0, 7)
    end = h.end_offset
    marker(h, commit=False)
    marker(h, commit=True)
    assert h.end_offset == end and fetch(h) == (0, 7)


def test_a_later_plain_commit_wins_over_an_earlier_transactional_one(tmp_path):
    h = harness(tmp_path)
    txn_commit(h, 42)
    commit = OffsetCommitRequest("g", (OffsetCommitRequestTopic("t", (OffsetCommitRequestPartition(0, 50),)),))
    h.call(lambda s, now: s.offset_commit(commit, now))
    marker(h, commit=True)
    assert fetch(h) == (0, 50)


def test_pending_offsets_survive_a_reload_and_bad_commits_are_refused(tmp_path):
    h = harness(tmp_path)
    txn_commit(h, 42, pid=1)
    txn_commit(h, 43, pid=2)
    h.reload()
    assert fetch(h) == (Errors.UNSTABLE_OFFSET_COMMIT.code, -1)
    marker(h, commit=True, pid=1)
    assert fetch(h) == (Errors.UNSTABLE_OFFSET_COMMIT.code, -1)  # producer 2 is still open
    assert fetch(h, stable=False) == (0, 42)
    marker(h, commit=True, pid=2)
    # The marker wrote producer 1's OffsetCommit after producer 2's pending record, so it is
    # the newer commit and stays (Kafka compares the transactional records' own offsets).
    assert fetch(h) == (0, 42)
    assert txn_commit(h, 1, metadata="x" * 5000).topics[0].partitions[0].error_code == \
        Errors.OFFSET_METADATA_TOO_LARGE.code
    request = TxnOffsetCommitRequest("tx", "", PID, 0)
    with pytest.raises(KafkaError) as e:
        h.call(lambda s, now: s.txn_offset_commit(request, now))
    assert e.value.error is Errors.INVALID_GROUP_ID


def test_a_commit_that_names_no_member_is_taken_into_a_group_with_members(tmp_path):
    """As Kafka: a TxnOffsetCommit need not name its member (aiokafka's producer sends only
    the group id); one that names a member is checked like an OffsetCommit."""
    from .helpers import stable_group
    from .test_consumer import harness as consumer_harness, two_members
    h = harness(tmp_path / "classic")
    stable_group(h)
    assert txn_commit(h, 42).topics[0].partitions[0].error_code == 0
    marker(h, commit=True)
    assert fetch(h) == (0, 42)
    stranger = TxnOffsetCommitRequest("tx", "g", PID, 0, generation_id=1, member_id="stranger")
    with pytest.raises(KafkaError) as e:
        h.call(lambda s, now: s.txn_offset_commit(stranger, now))
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID
    c = consumer_harness(tmp_path / "consumer")
    two_members(c)
    assert txn_commit(c, 7).topics[0].partitions[0].error_code == 0
    with pytest.raises(KafkaError) as e:
        c.call(lambda s, now: s.txn_offset_commit(stranger, now))
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID
