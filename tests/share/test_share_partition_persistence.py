"""SharePartition against the real share coordinator shard: its pending writes are what the
coordinator stores, a share partition loaded from the coordinator (also after the
coordinator restarts) has the same record states, and fenced writes stop the old leader."""
from __future__ import annotations

import pytest

from runtime.errors import Errors
from runtime.messages.share import AcknowledgementBatch, AcquiredRecords
from runtime.messages.share_state import (InitializeShareGroupStateRequest, InitializeStateData,
                                          InitializeStatePartitionData, ReadShareGroupStateSummaryRequest,
                                          ReadStateSummaryData, ReadStateSummaryPartitionData)
from runtime.share_state.coordinator import ShareCoordinatorShard
from runtime.share.partition import SharePartition, SharePartitionState
from runtime.share_state.records import RecordState
from runtime.testing import ShardHarness
from tests.share.test_share_partition import Read, named

G, T = "sg", "topic-id-1"
ACCEPT, RELEASE, REJECT = 1, 2, 3
LOCK = 30000


@pytest.fixture
def h(tmp_path):
    h = ShardHarness(str(tmp_path), ShareCoordinatorShard,
                     config={"share.coordinator.snapshot.update.records.per.snapshot": 2})
    init = InitializeShareGroupStateRequest(G, (InitializeStateData(T, (InitializeStatePartitionData(0, 0, -1),)),))
    h.call(lambda s, now: s.initialize_share_group_state(init, now))
    return h


def leader_epoch(h):
    """The leader epoch a SharePartition loading now claims, as the SharePartition actor's does:
    the one after the epoch the share coordinator's summary shows."""
    request = ReadShareGroupStateSummaryRequest(G, (ReadStateSummaryData(T, (ReadStateSummaryPartitionData(0),)),))
    return h.read(lambda s: s.read_share_group_state_summary(request)).results[0].partitions[0].leader_epoch + 1


def load(h, reset_offset=0):
    sp = SharePartition(G, T, 0, leader_epoch=leader_epoch(h))
    response = h.call(lambda s, now: s.read_share_group_state(sp.read_request(), now))
    sp.initialize(response.results[0].partitions[0], 0, reset_offset=reset_offset)
    return sp


def send(h, sp, pending):
    response = h.call(lambda s, now: s.write_share_group_state(pending.request(), now))
    result = response.results[0].partitions[0]
    return sp.complete_write(pending, result.error_code, result.error_message)


def test_written_state_loads_back_the_same(h):
    sp = load(h, reset_offset=100)
    assert (sp.start_offset, sp.next_fetch_offset()) == (100, 100)
    sp.acquire("m1", [(100, 109), (110, 119)], 100, 0)
    sp.acquire("m2", [(120, 129)], 100, 0)
    assert send(h, sp, sp.acknowledge("m1", named(sp, AcknowledgementBatch(100, 104, (ACCEPT,)),
                                             AcknowledgementBatch(105, 109, (RELEASE, ACCEPT, REJECT, RELEASE, ACCEPT))),
                                      10)) is None
    assert send(h, sp, sp.acknowledge("m2", named(sp, AcknowledgementBatch(120, 129, (ACCEPT,))), 20)) is None
    assert send(h, sp, sp.expire(LOCK)) is None  # m1's 110-119 come back
    assert sp.release_member("m2", LOCK) is None  # m2 holds nothing: no write
    sp.acquire("m3", [(105, 109)], 10, LOCK, fetch_offset=105)
    assert send(h, sp, sp.acknowledge("m3", named(sp, AcknowledgementBatch(105, 105, (ACCEPT,)),
                                             AcknowledgementBatch(108, 108, (REJECT,))), LOCK)) is None
    expected = {o: (state, count) for o, (state, count, _, _) in sp.record_states().items()}
    assert sp.start_offset == 110

    for _ in range(2):
        again = load(h)
        assert {o: (state, count) for o, (state, count, _, _) in again.record_states().items()} == expected
        assert (again.start_offset, again.end_offset, again.next_fetch_offset()) == (110, 129, 110)
        h.reload()


def test_loaded_partition_redelivers_what_was_never_acknowledged(h):
    sp = load(h)
    sp.acquire("m1", [(0, 9)], 100, 0)
    sp.acquire("m1", [(10, 19)], 100, 0)
    send(h, sp, sp.acknowledge("m1", named(sp, AcknowledgementBatch(10, 19, (ACCEPT,))), 5))
    # The leader dies holding 0-9; the new one has a gap to fetch first.
    again = load(h)
    assert (again.start_offset, again.next_fetch_offset()) == (0, 0)
    got = again.acquire("m2", [(0, 9), (10, 19), (20, 24)], 100, 0)
    assert got.acquired_records == (AcquiredRecords(0, 9, 1), AcquiredRecords(20, 24, 1))
    send(h, again, again.acknowledge("m2", named(again, AcknowledgementBatch(0, 9, (ACCEPT,)),
                                            AcknowledgementBatch(20, 24, (ACCEPT,))), 5))
    assert (again.start_offset, again.cached_batches()) == (25, [])


def test_a_fenced_write_rolls_back_and_stops_the_old_leader(h):
    old = load(h)
    old.acquire("m1", [(0, 9)], 100, 0)
    new = load(h)
    before = old.record_states()
    error = send(h, old, old.acknowledge("m1", named(old, AcknowledgementBatch(0, 9, (ACCEPT,))), 5))
    assert error.error is Errors.NOT_LEADER_OR_FOLLOWER
    assert old.state is SharePartitionState.FENCED and old.record_states() == before
    assert new.next_fetch_offset() == 0
    assert load(h).record_states() == {}


def test_a_failed_write_answers_a_retriable_error_and_changes_nothing(h):
    sp = load(h)
    sp.acquire("m1", [(0, 9)], 100, 0)
    pending = sp.acknowledge("m1", named(sp, AcknowledgementBatch(0, 9, (ACCEPT,))), 5)
    error = sp.complete_write(pending, Errors.COORDINATOR_LOAD_IN_PROGRESS.code)
    assert error.error is Errors.COORDINATOR_NOT_AVAILABLE and error.retriable
    assert sp.record_states()[0] == (RecordState.ACQUIRED, 1, "m1", LOCK)
    assert sp.state is SharePartitionState.ACTIVE



def test_a_failed_expiry_write_rides_along_with_the_next_write(h):
    """The release stands in memory (as in Kafka) and its records go with the next write, so a
    new leader neither delivers archived records again nor finds a delivery count that lags
    (shoal dropped the failed expiry: 5-9 came back with their deliveries forgotten)."""
    sp = SharePartition(G, T, 0, {"group.share.delivery.count.limit": 1}, leader_epoch=leader_epoch(h))
    response = h.call(lambda s, now: s.read_share_group_state(sp.read_request(), now))
    sp.initialize(response.results[0].partitions[0], 0, reset_offset=0)
    sp.acquire("m1", [(0, 4)], 100, 10)
    sp.acquire("m2", [(5, 9)], 100, 0)
    error = sp.complete_write(sp.expire(LOCK), Errors.COORDINATOR_NOT_AVAILABLE.code)
    assert error.error is Errors.COORDINATOR_NOT_AVAILABLE and sp.state is SharePartitionState.ACTIVE
    # 5-9 stand archived (the delivery limit is 1) although the coordinator has nothing.
    assert sp.record_states()[5] == (RecordState.ARCHIVED, 1, "", None)
    pending = sp.acknowledge("m1", named(sp, AcknowledgementBatch(0, 4, (ACCEPT,))), 20)
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in pending.state_batches] == [
        (0, 4, int(RecordState.ACKNOWLEDGED)), (5, 9, int(RecordState.ARCHIVED))]
    assert send(h, sp, pending) is None
    assert sp.start_offset == 10 and sp.unwritten_write() is None
    again = load(h)
    assert (again.start_offset, again.record_states(), again.next_fetch_offset()) == (10, {}, 10)


def test_a_failed_expiry_write_is_written_on_its_own_when_nothing_else_is():
    """With no other write to ride on, unwritten_write() carries the released records, as the
    share coordinator should hold them now: a record acquired again since counts the
    deliveries that ended, not the one under way."""
    sp = SharePartition(G, T, 0, {"group.share.delivery.count.limit": 5})
    sp.initialize(Read(0), 0)
    sp.acquire("m1", [(0, 9)], 100, 0)
    sp.rollback(sp.expire(LOCK))
    sp.acquire("m2", [(0, 4)], 5, LOCK)  # 0-4 out again: their second delivery
    first = sp.unwritten_write()
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in first.state_batches] == [
        (0, 9, int(RecordState.AVAILABLE), 1)]
    sp.rollback(first)  # failed again: still owed
    second = sp.unwritten_write()
    assert second.state_batches == first.state_batches
    sp.commit(second)
    assert sp.unwritten_write() is None


def test_a_fenced_expiry_write_stops_the_old_leader_and_the_release_stands(h):
    old = load(h)
    old.acquire("m1", [(0, 9)], 100, 0)
    load(h)
    error = send(h, old, old.expire(LOCK))
    assert error.error is Errors.NOT_LEADER_OR_FOLLOWER and old.state is SharePartitionState.FENCED
    assert old.record_states()[0] == (RecordState.AVAILABLE, 1, "", None)


def test_a_delivery_count_goes_back_when_the_leader_dies_before_its_expiry_write(h):
    """As in Kafka (releaseAcquisitionLockOnTimeout), a record whose lock ran out goes out
    again before its release is written; a leader that dies before the write lands leaves the
    count at what was last written. The next leader then hands the record out with a lower
    count than the dead one did, and may see it settled: the history checker allows this
    across a restart, never without one."""
    old = load(h)
    assert old.acquire("a", [(0, 0)], 100, 0).acquired_records == (AcquiredRecords(0, 0, 1),)
    old.expire(LOCK)  # the write of the release is under way when `old` dies
    assert old.acquire("b", [(0, 0)], 100, LOCK).acquired_records == (AcquiredRecords(0, 0, 2),)
    new = load(h)
    assert new.acquire("c", [(0, 0)], 100, 0).acquired_records == (AcquiredRecords(0, 0, 1),)
    assert send(h, new, new.acknowledge("c", named(new, AcknowledgementBatch(0, 0, (ACCEPT,))), 5)) is None
    assert (load(h).start_offset, new.start_offset) == (1, 1)
