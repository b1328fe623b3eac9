"""SharePartition with a manual clock (plain ints): acquisition, acknowledgement, locks,
delivery limits, start offset movement, persistence hand-off (commit / rollback), loading."""
from __future__ import annotations

from typing import NamedTuple

import pytest

from runtime.errors import Errors, KafkaError
from runtime.messages.share import AcknowledgementBatch, AcknowledgeType, AcquiredRecords
from runtime.share.inflight import TRANSITIONS, InFlightState
from runtime.share.partition import (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, SharePartition,
                                     SharePartitionState)
from runtime.share_state.records import PersisterStateBatch as PSB
from runtime.share_state.records import RecordState
from runtime.messages.share import name_deliveries

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (
    RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
ACCEPT, RELEASE, REJECT, RENEW, GAP = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                                       AcknowledgeType.RENEW, AcknowledgeType.GAP)
LOCK = 30000


class Read(NamedTuple):
    start_offset: int
    state_epoch: int = 0
    state_batches: tuple = ()
    error_code: int = 0
    error_message: str | None = None


def make(config=None, start=0, batches=(), epoch=3) -> SharePartition:
    sp = SharePartition("g", "topic-id", 0, config)
    sp.initialize(Read(start, epoch, tuple(batches)), 0)
    return sp


def AB(first, last, *types):
    return AcknowledgementBatch(first, last, tuple(int(t) for t in types))


def named(sp, *batches):
    """The batches as acknowledgements of the deliveries that hold their offsets now, as a
    share consumer names the deliveries it acknowledges."""
    return list(name_deliveries(batches, sp.acquisition_of))


def ack(sp, member, *batches, now=1000):
    pending = sp.acknowledge(member, named(sp, *batches), now)
    sp.commit(pending)
    return pending


def snapshot(sp):
    """Everything a caller can observe."""
    return (sp.record_states(), sp.start_offset, sp.end_offset, sp.next_fetch_offset(), sp.next_deadline(),
            [(b.first_offset, b.last_offset) for b in sp.cached_batches()])


def expect_error(error, fn, *args, **kwargs):
    with pytest.raises(KafkaError) as e:
        fn(*args, **kwargs)
    assert e.value.error is error, e.value
    return e.value


# ---- the record-state table ----

@pytest.mark.parametrize("start", list(RecordState))
@pytest.mark.parametrize("to", list(RecordState))
def test_transition_table_is_kafkas(start, to):
    legal = {(AVAILABLE, ACQUIRED), (AVAILABLE, ARCHIVED), (ACQUIRED, AVAILABLE), (ACQUIRED, ACKNOWLEDGED),
             (ACQUIRED, ARCHIVED)}
    assert (to in TRANSITIONS[start]) == ((start, to) in legal)
    s = InFlightState(0, 4, start, 2, "m" if start is ACQUIRED else "", 77)
    before = (s.state, s.delivery_count, s.member_id, s.deadline_ms)
    if (start, to) in legal:
        s._transition(to)
        assert s.state is to
    else:
        expect_error(Errors.INVALID_RECORD_STATE, s._transition, to)
        assert (s.state, s.delivery_count, s.member_id, s.deadline_ms) == before


def test_release_at_the_delivery_limit_archives_unless_the_delivery_is_given_back():
    s = InFlightState(0, 0, ACQUIRED, 5, "m", 10)
    s.move(AVAILABLE, 0, "", 5)
    assert (s.state, s.delivery_count) == (ARCHIVED, 5)
    s = InFlightState(0, 0, ACQUIRED, 5, "m", 10)
    s.move(AVAILABLE, -1, "", 5)
    assert (s.state, s.delivery_count) == (AVAILABLE, 4)


# ---- initialisation ----

def test_no_persisted_state_starts_at_the_reset_offset():
    sp = SharePartition("g", "t", 0)
    assert sp.reset_timestamp(5000) == LATEST_TIMESTAMP
    sp.initialize(Read(-1, 1), 5000, reset_offset=42)
    assert (sp.state, sp.start_offset, sp.end_offset, sp.next_fetch_offset(), sp.state_epoch) == (
        SharePartitionState.ACTIVE, 42, 42, 42, 1)


def test_reset_timestamps():
    assert SharePartition("g", "t", 0, {"share.auto.offset.reset": "earliest"}).reset_timestamp(9) == EARLIEST_TIMESTAMP
    sp = SharePartition("g", "t", 0, {"share.auto.offset.reset": "by_duration:PT1H30M"})
    assert sp.reset_timestamp(10_000_000) == 10_000_000 - 5_400_000
    assert SharePartition("g", "t", 0, {"share.auto.offset.reset": "by_duration:P1DT0.5S"}).reset_timestamp(
        100_000_000) == 100_000_000 - 86_400_500
    for bad in ("by_duration:1H", "by_duration:PT", "newest"):
        expect_error(Errors.INVALID_CONFIG, SharePartition("g", "t", 0, {"share.auto.offset.reset": bad}).reset_timestamp, 0)


def test_no_persisted_state_needs_a_reset_offset():
    with pytest.raises(ValueError):
        SharePartition("g", "t", 0).initialize(Read(-1), 0)


def test_persisted_batches_are_cached_and_terminal_head_moves_the_start_offset():
    sp = make(start=10, batches=[PSB(10, 14, 2, 1), PSB(15, 19, 0, 2), PSB(20, 24, 4, 5)])
    assert sp.start_offset == 15 and sp.end_offset == 24
    assert [(b.first_offset, b.last_offset) for b in sp.cached_batches()] == [(15, 19), (20, 24)]
    assert sp.next_fetch_offset() == 15
    got = sp.acquire("m", [(15, 19)], 100, 0)
    assert got.acquired_records == (AcquiredRecords(15, 19, 3),)
    assert sp.next_fetch_offset() == 25


def test_persisted_acquired_state_is_available_again():
    sp = make(start=0, batches=[PSB(0, 4, 1, 2)])
    assert sp.record_states()[0] == (AVAILABLE, 2, "", None)


def test_gap_window_fetches_the_gaps_left_by_a_restart_first():
    # 10-14 and 19-24 were acquired but never acknowledged before the restart: nothing knows them.
    sp = make(start=10, batches=[PSB(15, 18, 0, 1), PSB(25, 30, 2, 1)])
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (10, 30, 10)
    got = sp.acquire("m", [(10, 20)], 100, 0)
    assert got.acquired_records == (AcquiredRecords(10, 14, 1), AcquiredRecords(15, 18, 2), AcquiredRecords(19, 20, 1))
    assert got.count == 11
    assert sp.next_fetch_offset() == 21
    got = sp.acquire("m", [(21, 40)], 100, 0)
    assert got.acquired_records == (AcquiredRecords(21, 24, 1), AcquiredRecords(31, 40, 1))
    assert sp.next_fetch_offset() == 41
    ack(sp, "m", AB(10, 24, ACCEPT), AB(31, 40, ACCEPT))
    assert (sp.start_offset, sp.end_offset, sp.cached_batches()) == (41, 41, [])


def test_acknowledged_batches_before_a_gap_do_not_skip_the_gap():
    sp = make(start=0, batches=[PSB(0, 9, 0, 1), PSB(20, 29, 0, 1)])
    sp.acquire("m", [(0, 9)], 10, 0)
    ack(sp, "m", AB(0, 9, ACCEPT))
    assert sp.start_offset == 10  # the gap 10-19 still has to be fetched
    assert sp.next_fetch_offset() == 10


def test_failed_read_fails_the_partition():
    sp = SharePartition("g", "t", 0)
    expect_error(Errors.COORDINATOR_NOT_AVAILABLE, sp.initialize,
                 Read(0, error_code=Errors.COORDINATOR_LOAD_IN_PROGRESS.code), 0)
    assert sp.state is SharePartitionState.FAILED
    expect_error(Errors.UNKNOWN_SERVER_ERROR, sp.acquire, "m", [(0, 1)], 10, 0)
    sp = SharePartition("g", "t", 0)
    expect_error(Errors.NOT_LEADER_OR_FOLLOWER, sp.initialize, Read(0, error_code=Errors.FENCED_LEADER_EPOCH.code), 0)


def test_persisted_batch_before_the_start_offset_is_invalid():
    sp = SharePartition("g", "t", 0)
    expect_error(Errors.UNKNOWN_SERVER_ERROR, sp.initialize, Read(10, 0, (PSB(5, 12, 0, 1),)), 0)
    assert sp.state is SharePartitionState.FAILED


def test_not_initialised_or_fenced_partition_serves_nothing():
    sp = SharePartition("g", "t", 0)
    expect_error(Errors.LEADER_NOT_AVAILABLE, sp.acquire, "m", [(0, 1)], 10, 0)
    sp = make()
    sp.fence()
    expect_error(Errors.LEADER_NOT_AVAILABLE, sp.acknowledge, "m", [AB(0, 0, ACCEPT)], 0)
    expect_error(Errors.INVALID_REQUEST, sp.fence)


# ---- acquiring ----

def test_acquire_new_records_locks_them_for_the_member():
    sp = make()
    got = sp.acquire("m1", [(0, 4), (5, 9)], 100, 1000)
    assert got.acquired_records == (AcquiredRecords(0, 9, 1),) and got.count == 10
    assert sp.record_states()[3] == (ACQUIRED, 1, "m1", 1000 + LOCK)
    assert (sp.next_fetch_offset(), sp.next_deadline(), sp.in_flight_records) == (10, 1000 + LOCK, 10)
    assert sp.acquire("m2", [(0, 4), (5, 9)], 100, 1000).acquired_records == ()


def test_acquiring_needs_a_member_id():
    expect_error(Errors.INVALID_REQUEST, make().acquire, "", [(0, 4)], 100, 0)


def test_max_records_keeps_log_batch_boundaries_and_batch_size_splits():
    sp = make()
    got = sp.acquire("m", [(0, 4), (5, 9), (10, 14)], 7, 0)
    assert got.acquired_records == (AcquiredRecords(0, 9, 1),) and got.count == 10
    got = sp.acquire("m", [(10, 14), (15, 19), (20, 24), (25, 29)], 100, 0, batch_size=10)
    assert got.acquired_records == (AcquiredRecords(10, 19, 1), AcquiredRecords(20, 29, 1))
    assert [(b.first_offset, b.last_offset) for b in sp.cached_batches()] == [(0, 9), (10, 19), (20, 29)]


def test_record_lock_duration_group_config_overrides_the_default():
    sp = make({"group.share.record.lock.duration.ms": 1000})
    sp.acquire("m", [(0, 0)], 1, 0)
    sp.config["share.record.lock.duration.ms"] = 500
    sp.acquire("m", [(1, 1)], 1, 0)
    assert [v[3] for v in sp.record_states().values()] == [1000, 500]


def test_max_record_locks_caps_what_is_in_flight():
    sp = make({"group.share.partition.max.record.locks": 10})
    assert sp.acquire("m1", [(0, 7)], 100, 0).count == 8
    got = sp.acquire("m1", [(8, 15)], 100, 0)
    assert got.acquired_records == (AcquiredRecords(8, 15, 1),)  # whole log batch, past the cap
    assert not sp.can_acquire_records()
    assert sp.acquire("m2", [(16, 20)], 100, 0).acquired_records == ()
    ack(sp, "m1", AB(0, 7, ACCEPT))
    assert sp.can_acquire_records() and sp.in_flight_records == 8
    assert sp.acquire("m2", [(16, 20)], 100, 0).acquired_records == (AcquiredRecords(16, 20, 1),)


def test_at_the_lock_cap_released_records_can_still_go_out():
    sp = make({"group.share.partition.max.record.locks": 10})
    sp.acquire("m1", [(0, 9)], 100, 0)
    ack(sp, "m1", AB(5, 5, RELEASE))
    assert sp.can_acquire_records() and sp.next_fetch_offset() == 5
    got = sp.acquire("m2", [(5, 19)], 100, 0)
    assert got.acquired_records == (AcquiredRecords(5, 5, 2),) and got.count == 1
    assert sp.end_offset == 9


def test_reacquiring_part_of_a_released_batch_tracks_offsets():
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    ack(sp, "m1", AB(0, 9, RELEASE))
    got = sp.acquire("m2", [(0, 9)], 4, 10)  # the batch is re-delivered whole
    assert got.acquired_records == (AcquiredRecords(0, 9, 2),)
    ack(sp, "m2", AB(0, 9, RELEASE))
    got = sp.acquire("m3", [(3, 9)], 4, 20, fetch_offset=3)  # a read from inside the batch: offsets 3-6
    assert got.acquired_records == (AcquiredRecords(3, 6, 3),)
    assert sp.next_fetch_offset() == 0


def test_read_committed_stops_at_the_last_stable_offset_and_archives_aborted_records():
    sp = make({"share.isolation.level": "read_committed"})
    got = sp.acquire("m", [(0, 4), (5, 9), (10, 14)], 100, 0, last_stable_offset=10, aborted=[(5, 9)])
    assert got.acquired_records == (AcquiredRecords(0, 4, 1),) and got.count == 5
    assert sp.record_states()[7] == (ARCHIVED, 1, "", None)
    assert sp.end_offset == 9
    ack(sp, "m", AB(0, 4, ACCEPT))
    assert (sp.start_offset, sp.next_fetch_offset()) == (10, 10)


def test_read_uncommitted_ignores_the_last_stable_offset():
    sp = make()
    got = sp.acquire("m", [(0, 4), (5, 9)], 100, 0, last_stable_offset=5, aborted=[(5, 9)])
    assert got.acquired_records == (AcquiredRecords(0, 9, 1),)


# ---- acknowledging ----

@pytest.mark.parametrize("ack_type, state", [(ACCEPT, ACKNOWLEDGED), (REJECT, ARCHIVED), (GAP, ARCHIVED)])
def test_terminal_acknowledgement_of_a_whole_batch(ack_type, state):
    sp = make()
    sp.acquire("m", [(0, 9)], 100, 0)
    pending = sp.acknowledge("m", named(sp, AB(0, 9, ack_type)), 100)
    assert pending.state_batches == (PSB(0, 9, int(state), 1),)
    assert (pending.state_epoch, pending.start_offset, pending.delivery_complete_count) == (3, 0, 10)
    assert sp.record_states()[0][0] is state and sp.start_offset == 0  # moves only once durable
    sp.commit(pending)
    assert (sp.start_offset, sp.end_offset, sp.cached_batches(), sp.next_fetch_offset()) == (10, 10, [], 10)
    assert sp.next_deadline() is None


def test_release_makes_records_available_again_with_the_same_delivery_count():
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    pending = ack(sp, "m1", AB(0, 9, RELEASE))
    assert pending.state_batches == (PSB(0, 9, 0, 1),)
    assert sp.record_states()[0] == (AVAILABLE, 1, "", None) and sp.next_fetch_offset() == 0
    assert sp.acquire("m2", [(0, 9)], 100, 0).acquired_records == (AcquiredRecords(0, 9, 2),)


def test_per_offset_acknowledgement_types():
    sp = make()
    sp.acquire("m", [(0, 4)], 100, 0)
    pending = ack(sp, "m", AB(0, 4, ACCEPT, RELEASE, REJECT, GAP, ACCEPT))
    assert pending.state_batches == (PSB(0, 0, 2, 1), PSB(1, 1, 0, 1), PSB(2, 3, 4, 1), PSB(4, 4, 2, 1))
    states = sp.record_states()
    assert [states[o][0] for o in range(1, 5)] == [AVAILABLE, ARCHIVED, ARCHIVED, ACKNOWLEDGED]
    assert sp.start_offset == 1 and sp.next_fetch_offset() == 1


def test_partial_acknowledgement_of_a_batch():
    sp = make()
    sp.acquire("m", [(0, 9)], 100, 0)
    ack(sp, "m", AB(0, 3, ACCEPT))
    assert sp.start_offset == 4 and sp.record_states()[4] == (ACQUIRED, 1, "m", LOCK)
    ack(sp, "m", AB(4, 9, ACCEPT))
    assert (sp.start_offset, sp.cached_batches()) == (10, [])


def test_acknowledgement_spanning_batches_and_out_of_order_acknowledgement():
    sp = make()
    sp.acquire("m", [(0, 4)], 100, 0)
    sp.acquire("m", [(5, 9)], 100, 0)
    sp.acquire("m", [(10, 14)], 100, 0)
    ack(sp, "m", AB(5, 14, ACCEPT))
    assert sp.start_offset == 0
    ack(sp, "m", AB(0, 4, ACCEPT))
    assert (sp.start_offset, sp.end_offset, sp.cached_batches()) == (15, 15, [])


@pytest.mark.parametrize("ack_type", [ACCEPT, RELEASE, REJECT, RENEW])
def test_acknowledging_below_the_start_offset_is_refused(ack_type):
    """Kafka's "batch record not found": a repeated acknowledgement of records already settled
    and gone from the cache is INVALID_RECORD_STATE (shoal took it as harmless), even when it
    names the delivery that was settled."""
    sp = make()
    got = sp.acquire("m", [(0, 9)], 100, 0)
    ack(sp, "m", AB(0, 9, ACCEPT))
    assert sp.start_offset == 10
    before = snapshot(sp)
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m",
                 [AcknowledgementBatch(3, 7, (int(ack_type),), got.acquisition_id)], 0)
    assert snapshot(sp) == before


def test_a_late_acknowledgement_of_an_earlier_delivery_is_refused():
    """The same member holds offsets 0-9 again (its first lock ran out): the acknowledgement it
    sent for the first delivery arrives now and must not settle the second one."""
    sp = make({"group.share.record.lock.duration.ms": 100})
    first = sp.acquire("m", [(0, 9)], 100, 0)
    sp.expire(100)
    second = sp.acquire("m", [(0, 9)], 100, 150)
    assert second.acquired_records == (AcquiredRecords(0, 9, 2),)
    assert second.acquisition_id != first.acquisition_id
    before = snapshot(sp)
    for ack_type in (ACCEPT, RELEASE, REJECT, RENEW):
        e = expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m",
                         [AcknowledgementBatch(0, 9, (int(ack_type),), first.acquisition_id)], 160)
        assert "acquisition" in e.message
        assert snapshot(sp) == before
    # One offset of the earlier delivery among the current one's refuses the whole request.
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m",
                 [AcknowledgementBatch(0, 4, (int(ACCEPT),), second.acquisition_id),
                  AcknowledgementBatch(5, 9, (int(ACCEPT),), first.acquisition_id)], 160)
    assert snapshot(sp) == before
    # An acknowledgement that names no delivery names none of them.
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m", [AB(0, 9, ACCEPT)], 160)
    sp.commit(sp.acknowledge("m", [AcknowledgementBatch(0, 9, (int(ACCEPT),), second.acquisition_id)], 160))
    assert sp.start_offset == 10


def test_acquisition_ids_differ_across_a_reload():
    """A SharePartition loaded again has a higher leader epoch: its first acquisition is not
    named like the first of the one before, whose late acknowledgements it must refuse."""
    one = SharePartition("g", "topic-id", 0, leader_epoch=1)
    one.initialize(Read(0), 0)
    two = SharePartition("g", "topic-id", 0, leader_epoch=2)
    two.initialize(Read(0), 0)
    a, b = one.acquire("m", [(0, 9)], 100, 0), two.acquire("m", [(0, 9)], 100, 0)
    assert a.acquired_records == b.acquired_records and a.acquisition_id != b.acquisition_id
    expect_error(Errors.INVALID_RECORD_STATE, two.acknowledge, "m",
                 [AcknowledgementBatch(0, 9, (int(ACCEPT),), a.acquisition_id)], 10)




def test_renew_restarts_the_lock_without_a_new_delivery():
    sp = make()
    sp.acquire("m", [(0, 9)], 100, 0)
    pending = ack(sp, "m", AB(0, 9, RENEW), now=20000)
    assert pending.state_batches == ()
    assert sp.record_states()[0] == (ACQUIRED, 1, "m", 20000 + LOCK)
    assert sp.next_deadline() == 20000 + LOCK
    assert sp.expire(LOCK) is None
    ack(sp, "m", AB(2, 3, RENEW), now=40000)
    assert sp.next_deadline() == 20000 + LOCK
    pending = sp.expire(20000 + LOCK)
    assert pending.state_batches == (PSB(0, 1, 0, 1), PSB(4, 9, 0, 1))
    sp.commit(pending)
    assert sp.record_states()[2] == (ACQUIRED, 1, "m", 40000 + LOCK)
    assert sp.acquire("m2", [(0, 9)], 100, 0).acquired_records == (AcquiredRecords(0, 1, 2), AcquiredRecords(4, 9, 2))


def test_renew_is_invalid_on_records_not_acquired():
    sp = make()
    sp.acquire("m", [(0, 9)], 100, 0)
    ack(sp, "m", AB(0, 4, ACCEPT), AB(5, 9, RELEASE))
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m", [AB(2, 2, RENEW)], 0)  # below the start offset
    sp.acquire("m", [(10, 14)], 100, 0)
    ack(sp, "m", AB(10, 10, ACCEPT))
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m", [AB(10, 10, RENEW)], 0)
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m", [AB(5, 5, RENEW)], 0)


def test_only_the_holder_may_acknowledge_and_nothing_changes_otherwise():
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    sp.acquire("m2", [(10, 19)], 100, 0)
    before = snapshot(sp)
    e = expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m2", [AB(0, 9, ACCEPT)], 0)
    assert "not held by member m2" in str(e)
    # A valid first batch and an invalid second one: the first does not take effect either.
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m1", [AB(0, 4, ACCEPT), AB(8, 12, ACCEPT)], 0)
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m1", [AB(0, 4, RENEW), AB(10, 10, RENEW)], 5)
    assert snapshot(sp) == before


@pytest.mark.parametrize("batch, error", [
    (AB(5, 4, ACCEPT), Errors.INVALID_REQUEST),  # first after last
    (AB(0, 4, ACCEPT, ACCEPT), Errors.INVALID_REQUEST),  # neither one type nor one per offset
    (AB(0, 4, 7), Errors.INVALID_REQUEST),  # unknown type
    (AB(0, 4), Errors.INVALID_REQUEST),  # no type
    (AB(8, 25, ACCEPT), Errors.INVALID_REQUEST),  # past the acquired records
    (AB(30, 35, ACCEPT), Errors.INVALID_REQUEST),  # never delivered
])
def test_malformed_acknowledgements_change_nothing(batch, error):
    sp = make(start=5)
    sp.acquire("m", [(5, 19)], 100, 0)
    before = snapshot(sp)
    expect_error(error, sp.acknowledge, "m", [batch], 0)
    assert snapshot(sp) == before


def test_acknowledging_around_the_start_offset():
    sp = make(start=5)
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m", [AB(5, 6, ACCEPT)], 0)  # nothing delivered
    sp.acquire("m", [(5, 9)], 100, 0)
    # Wholly before the start offset, with nothing cached there: Kafka's "batch record not found".
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m", named(sp, AB(0, 3, ACCEPT)), 0)
    expect_error(Errors.INVALID_REQUEST, sp.acknowledge, "m", [AB(5, 6, ACCEPT), AB(6, 7, ACCEPT)], 0)
    assert ack(sp, "m", AB(3, 6, ACCEPT)).state_batches == (PSB(5, 6, 2, 1),)
    assert sp.start_offset == 7


def test_acknowledging_a_record_with_a_write_under_way_is_invalid():
    sp = make()
    sp.acquire("m", [(0, 9)], 100, 0)
    pending = sp.acknowledge("m", named(sp, AB(0, 9, ACCEPT)), 0)
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m", [AB(0, 9, ACCEPT)], 0)
    sp.commit(pending)
    with pytest.raises(ValueError):
        sp.commit(pending)


# ---- lock expiry and the delivery count limit ----

def test_lock_expiry_releases_and_the_delivery_limit_archives():
    sp = make({"group.share.delivery.count.limit": 2})
    now = 0
    for delivery in (1, 2):
        got = sp.acquire(f"m{delivery}", [(0, 4)], 100, now)
        assert got.acquired_records == (AcquiredRecords(0, 4, delivery),)
        assert sp.expire(now + LOCK - 1) is None
        now += LOCK
        pending = sp.expire(now)
        final = ARCHIVED if delivery == 2 else AVAILABLE
        assert pending.state_batches == (PSB(0, 4, int(final), delivery),)
        assert sp.record_states()[0] == (final, delivery, "", None)
        sp.commit(pending)
    assert (sp.start_offset, sp.cached_batches(), sp.next_fetch_offset()) == (5, [], 5)


def test_release_at_the_delivery_limit_archives():
    sp = make({"group.share.delivery.count.limit": 2})
    sp.acquire("m", [(0, 4)], 100, 0)
    ack(sp, "m", AB(0, 4, RELEASE))
    sp.acquire("m", [(0, 4)], 100, 0)
    pending = ack(sp, "m", AB(0, 4, RELEASE))
    assert pending.state_batches == (PSB(0, 4, 4, 2),)
    assert sp.start_offset == 5


def test_the_holder_cannot_acknowledge_after_its_lock_expired():
    sp = make()
    sp.acquire("m", [(0, 4)], 100, 0)
    sp.commit(sp.expire(LOCK))
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m", [AB(0, 4, ACCEPT)], LOCK + 1)


def test_expiry_skips_records_with_a_write_under_way():
    sp = make()
    sp.acquire("m", [(0, 4)], 100, 0)
    pending = sp.acknowledge("m", named(sp, AB(0, 4, ACCEPT)), 10)
    assert sp.next_deadline() is None and sp.expire(LOCK) is None
    sp.commit(pending)
    assert sp.start_offset == 5


# ---- member release ----

def test_release_member_frees_what_it_holds_and_gives_the_delivery_back():
    sp = make()
    sp.acquire("m1", [(0, 4)], 100, 0)
    sp.acquire("m2", [(5, 9)], 100, 0)
    ack(sp, "m1", AB(0, 0, ACCEPT))
    pending = sp.release_member("m1", 10)
    assert pending.state_batches == (PSB(1, 4, 0, 0),)
    sp.commit(pending)
    assert sp.record_states()[1] == (AVAILABLE, 0, "", None)
    assert sp.record_states()[5] == (ACQUIRED, 1, "m2", LOCK)
    assert sp.release_member("m1", 10) is None
    assert sp.next_fetch_offset() == 1
    assert sp.acquire("m2", [(0, 4)], 100, 20).acquired_records == (AcquiredRecords(1, 4, 1),)


# ---- commit and rollback ----

def test_rollback_restores_exactly_the_previous_state():
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    sp.acquire("m2", [(10, 19)], 100, 5)
    for make_change in (
        lambda: sp.acknowledge("m1", named(sp, AB(0, 9, ACCEPT)), 100),
        lambda: sp.acknowledge("m1", named(sp, AB(0, 4, RELEASE, ACCEPT, REJECT, GAP, ACCEPT)), 100),
        lambda: sp.acknowledge("m2", named(sp, AB(12, 19, RELEASE)), 100),
        lambda: sp.release_member("m2", 100),
    ):
        before = snapshot(sp)
        pending = make_change()
        assert pending.state_batches and snapshot(sp) != before
        sp.rollback(pending)
        assert snapshot(sp) == before
    # And the rolled-back records can be acknowledged for real.
    ack(sp, "m1", AB(0, 9, ACCEPT))
    assert sp.start_offset == 10


def test_a_lock_that_ran_out_during_a_failed_write_is_due_at_once():
    sp = make()
    sp.acquire("m", [(0, 4)], 100, 0)
    pending = sp.acknowledge("m", named(sp, AB(0, 4, ACCEPT)), LOCK - 1)
    sp.rollback(pending)
    assert sp.next_deadline() == LOCK
    expired = sp.expire(LOCK + 100)
    assert expired.state_batches == (PSB(0, 4, 0, 1),)
    sp.commit(expired)
    assert sp.record_states()[0] == (AVAILABLE, 1, "", None)


def test_an_expiry_stands_when_its_write_fails():
    # Kafka releases on lock timeout whether or not the share coordinator took the write:
    # the next member gets the records at once and the old holder's ACCEPT is refused.
    sp = make()
    sp.acquire("m1", [(0, 4)], 100, 0)
    expired = sp.expire(LOCK)
    assert expired.final and expired.state_batches == (PSB(0, 4, 0, 1),)
    assert sp.record_states()[0] == (AVAILABLE, 1, "", None)
    sp.rollback(expired)  # the write failed
    assert sp.record_states()[0] == (AVAILABLE, 1, "", None) and sp.next_deadline() is None
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m1", [AB(0, 4, ACCEPT)], LOCK + 1)
    assert sp.acquire("m2", [(0, 4)], 100, LOCK + 2).acquired_records == (AcquiredRecords(0, 4, 2),)


def test_an_expiry_at_the_delivery_limit_archives_when_its_write_fails():
    sp = make({"group.share.delivery.count.limit": 1})
    sp.acquire("m1", [(0, 4)], 100, 0)
    sp.acquire("m1", [(5, 9)], 100, 0)
    expired = sp.expire(LOCK)
    assert expired.state_batches == (PSB(0, 9, 4, 1),)
    assert expired.start_offset == 0  # Kafka moves the start offset once the write is settled
    sp.rollback(expired)
    assert (sp.start_offset, sp.cached_batches(), sp.next_fetch_offset()) == (10, [], 10)


def test_records_released_by_a_pending_write_are_not_acquired_until_it_commits():
    sp = make()
    sp.acquire("m1", [(0, 4)], 100, 0)
    pending = sp.acknowledge("m1", named(sp, AB(0, 4, RELEASE)), 10)
    assert sp.acquire("m2", [(0, 4)], 100, 20).acquired_records == ()
    sp.commit(pending)
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("m2", [(0, 4)], 100, 20).acquired_records == (AcquiredRecords(0, 4, 2),)


def test_interleaved_writes_settle_independently():
    sp = make()
    sp.acquire("m1", [(0, 4)], 100, 0)
    sp.acquire("m2", [(5, 9)], 100, 0)
    first = sp.acknowledge("m1", named(sp, AB(0, 4, ACCEPT)), 10)
    second = sp.acknowledge("m2", named(sp, AB(5, 9, ACCEPT)), 10)
    # The second write claims only what is durable and its own: the first may yet fail (it does),
    # and the share coordinator keeps the larger count it is given (the lag would be too low).
    assert (first.delivery_complete_count, second.delivery_complete_count) == (5, 5)
    sp.commit(second)
    assert sp.start_offset == 0  # 0-4 is not durable yet
    sp.rollback(first)
    assert sp.record_states()[0] == (ACQUIRED, 1, "m1", LOCK)
    ack(sp, "m1", AB(0, 4, ACCEPT))
    assert (sp.start_offset, sp.cached_batches()) == (10, [])


# ---- loading what was written ----

class Coordinator:
    """What the share coordinator keeps of the committed writes: newer states win per offset."""

    def __init__(self, start=0):
        self.start = start
        self.offsets = {}

    def write(self, pending):
        self.start = max(self.start, pending.start_offset)
        for b in pending.state_batches:
            for o in range(b.first_offset, b.last_offset + 1):
                self.offsets[o] = (b.delivery_state, b.delivery_count)
        self.offsets = {o: v for o, v in self.offsets.items() if o >= self.start}

    def read(self, epoch=3):
        return Read(self.start, epoch, tuple(PSB(o, o, s, c) for o, (s, c) in sorted(self.offsets.items())))


def test_reloading_the_written_state_gives_the_same_state():
    sp, store = make(), Coordinator()

    def settle(pending):
        store.write(pending)
        sp.commit(pending)

    sp.acquire("m1", [(0, 9), (10, 19)], 100, 0)
    settle(sp.acknowledge("m1", named(sp, AB(0, 9, ACCEPT), AB(10, 14, RELEASE, ACCEPT, REJECT, RELEASE, ACCEPT)), 10))
    settle(sp.expire(LOCK))
    sp.acquire("m2", [(10, 19)], 100, LOCK)
    settle(sp.acknowledge("m2", named(sp, AB(13, 13, ACCEPT)), LOCK))
    settle(sp.release_member("m2", LOCK))
    reloaded = SharePartition("g", "topic-id", 0)
    reloaded.initialize(store.read(), 0)
    assert reloaded.record_states() == sp.record_states()
    assert (reloaded.start_offset, reloaded.end_offset, reloaded.next_fetch_offset()) == (
        sp.start_offset, sp.end_offset, sp.next_fetch_offset())


def test_offsets_released_by_a_pending_write_are_skipped_inside_a_tracked_batch():
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    ack(sp, "m1", AB(0, 0, RELEASE))  # 0 is available again, the batch is tracked per offset
    pending = sp.acknowledge("m1", named(sp, AB(1, 2, RELEASE)), 10)
    got = sp.acquire("m2", [(0, 9)], 100, 20)
    assert got.acquired_records == (AcquiredRecords(0, 0, 2),)
    sp.commit(pending)
    assert sp.next_fetch_offset() == 1
    assert sp.acquire("m3", [(0, 9)], 100, 30).acquired_records == (AcquiredRecords(1, 2, 2),)


def test_records_gone_from_the_log_are_archived_when_a_read_skips_them():
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    ack(sp, "m1", AB(0, 9, RELEASE))
    got = sp.acquire("m2", [(5, 9), (10, 14)], 100, 10, fetch_offset=0)  # 0-4 compacted away
    assert got.acquired_records == (AcquiredRecords(5, 9, 2), AcquiredRecords(10, 14, 1))
    assert sp.record_states()[0] == (ARCHIVED, 1, "", None)
    ack(sp, "m2", AB(5, 14, ACCEPT))
    assert (sp.start_offset, sp.cached_batches()) == (15, [])


def test_log_start_offset_movement():
    # Kafka's updateCacheAndOffsets: available records below the log start offset are
    # archived and the start offset becomes the log start offset; held ones stay held.
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    sp.acquire("m2", [(10, 19)], 100, 0)
    ack(sp, "m1", AB(0, 9, RELEASE))
    ack(sp, "m2", AB(10, 11, ACCEPT))
    sp.update_log_start_offset(15)
    # 0-9 (available) is archived and dropped; 12-14 are still held by m2 but no longer count.
    assert (sp.start_offset, sp.next_fetch_offset()) == (15, 20)
    assert [(b.first_offset, b.last_offset) for b in sp.cached_batches()] == [(10, 19)]
    assert sp.record_states()[15] == (ACQUIRED, 1, "m2", LOCK)
    # Acknowledgements wholly below the start offset are checked like any: only the holder's
    # own delivery of 12-14 may be acknowledged there (shoal took any as harmless).
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m1", named(sp, AB(12, 14, ACCEPT)), 5)
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m2", [AB(12, 14, ACCEPT)], 5)
    pending = sp.expire(LOCK)
    # Expired below the start offset: archived whatever the delivery count (Kafka).
    assert pending.state_batches == (PSB(12, 14, 4, 1), PSB(15, 19, 0, 1)) and pending.start_offset == 15
    sp.commit(pending)
    assert sp.record_states() == {o: (AVAILABLE, 1, "", None) for o in range(15, 20)}
    assert 14 not in sp.record_states() and sp.next_fetch_offset() == 15
    sp.update_log_start_offset(30)
    assert (sp.start_offset, sp.end_offset, sp.cached_batches(), sp.next_fetch_offset()) == (30, 30, [], 30)
    sp.update_log_start_offset(25)
    assert sp.start_offset == 30


def test_the_start_offset_becomes_the_log_start_offset_without_skipping_on():
    # Kafka sets the start offset to the log start offset: settled records and gaps in the
    # log just after it do not carry it further until the next change settles.
    sp = make()
    sp.acquire("m1", [(0, 4)], 100, 0)
    sp.acquire("m2", [(5, 9)], 100, 0)
    sp.acquire("m2", [(20, 24)], 100, 0, fetch_offset=10)  # 10-19 are not in the log
    ack(sp, "m2", AB(5, 9, ACCEPT))
    assert sp.start_offset == 0
    sp.update_log_start_offset(5)
    assert sp.start_offset == 5  # not 10: 5-9 are settled, yet the start offset stays
    sp.update_log_start_offset(12)
    assert sp.start_offset == 12  # not 20: a gap in the log is not skipped on either
    pending = ack(sp, "m2", AB(20, 24, ACCEPT))
    assert pending.start_offset == 12
    # 0-4, held by m1 below the log start offset, still hold the start offset back.
    assert sp.start_offset == 12
    expired = sp.expire(LOCK)
    assert expired.state_batches == (PSB(0, 4, 4, 1),)
    sp.commit(expired)
    assert (sp.start_offset, sp.cached_batches()) == (25, [])


def test_a_record_held_below_the_log_start_offset_holds_the_start_offset_back():
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    ack(sp, "m1", AB(5, 9, ACCEPT))
    sp.acquire("m2", [(10, 14)], 100, 0)
    sp.update_log_start_offset(5)
    assert sp.start_offset == 5
    ack(sp, "m2", AB(10, 14, ACCEPT))
    assert sp.start_offset == 5  # 0-4 are still held by m1
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m2", named(sp, AB(0, 4, ACCEPT)), 10)
    pending = sp.release_member("m1", 20)
    sp.commit(pending)
    assert (sp.start_offset, sp.cached_batches()) == (15, [])


def test_the_holder_settles_what_it_holds_below_the_log_start_offset():
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    sp.acquire("m2", [(10, 14)], 100, 0)
    sp.update_log_start_offset(5)
    ack(sp, "m2", AB(10, 14, ACCEPT))
    assert sp.start_offset == 5  # 0-4 are still held by m1
    assert ack(sp, "m1", AB(0, 4, ACCEPT), AB(5, 9, REJECT), now=10).state_batches == (PSB(0, 4, 2, 1),
                                                                                       PSB(5, 9, 4, 1))
    assert (sp.start_offset, sp.cached_batches(), sp.next_deadline()) == (15, [], None)


def test_an_expired_batch_across_the_log_start_offset_is_archived_below_it():
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    sp.update_log_start_offset(5)
    expired = sp.expire(LOCK)
    # Below the start offset nobody may take them, even before the write is settled.
    assert sp.next_fetch_offset() == 5
    assert sp.acquire("m2", [(0, 9)], 100, LOCK, fetch_offset=0).acquired_records == (AcquiredRecords(5, 9, 2),)
    sp.commit(expired)
    assert sp.start_offset == 5 and sp.record_states()[5] == (ACQUIRED, 2, "m2", 2 * LOCK)


def test_the_start_offset_never_moves_back():
    # A departure (README): Kafka's maybeUpdateCachedStateAndOffsets would recompute 2 here,
    # the offset after the settled 0-1 at the front of its cache, below the log start offset.
    sp = make()
    sp.acquire("m1", [(0, 9)], 100, 0)
    ack(sp, "m1", AB(0, 1, ACCEPT), AB(5, 9, ACCEPT))
    assert sp.start_offset == 2
    sp.acquire("m2", [(10, 14)], 100, 0)
    sp.update_log_start_offset(5)
    ack(sp, "m2", AB(10, 14, ACCEPT))
    assert sp.start_offset == 5
    sp.commit(sp.expire(LOCK))  # 2-4 are archived: nothing holds the start offset back
    assert (sp.start_offset, sp.cached_batches()) == (15, [])


def test_records_delivered_often_go_out_in_smaller_groups_and_alone_on_their_last_delivery():
    # Limit 5: from 3 deliveries on, a group is halved per delivery; the 5th delivery goes alone.
    sp = make(start=0, batches=[PSB(0, 9, 0, 1), PSB(10, 17, 0, 3), PSB(18, 19, 0, 4), PSB(20, 29, 0, 1)])
    got = sp.acquire("m", [(0, 29)], 100, 0)
    assert got.acquired_records == (AcquiredRecords(0, 9, 2),)  # stops before the often-delivered ones
    got = sp.acquire("m", [(0, 29)], 100, 0, fetch_offset=10)
    assert got.acquired_records == (AcquiredRecords(10, 13, 4),)  # 8 >> 1
    got = sp.acquire("m", [(0, 29)], 100, 0, fetch_offset=14)
    assert got.acquired_records == (AcquiredRecords(14, 17, 4),)
    got = sp.acquire("m", [(0, 29)], 100, 0, fetch_offset=18)
    assert got.acquired_records == (AcquiredRecords(18, 18, 5),)  # the last delivery, alone
    got = sp.acquire("m", [(0, 29)], 100, 0, fetch_offset=19)
    assert got.acquired_records == (AcquiredRecords(19, 19, 5),)
    got = sp.acquire("m", [(0, 29)], 100, 0, fetch_offset=20)
    assert got.acquired_records == (AcquiredRecords(20, 29, 2),)


def test_record_limit_mode_never_exceeds_max_records():
    from runtime.messages.share import RECORD_LIMIT
    sp = make()
    got = sp.acquire("m1", [(0, 9), (10, 19)], 4, 0, share_acquire_mode=RECORD_LIMIT)
    assert got.acquired_records == (AcquiredRecords(0, 3, 1),) and got.count == 4
    assert sp.next_fetch_offset() == 4
    got = sp.acquire("m2", [(0, 9), (10, 19)], 4, 0, share_acquire_mode=RECORD_LIMIT, fetch_offset=4)
    assert got.acquired_records == (AcquiredRecords(4, 7, 1),)
    ack(sp, "m1", AB(0, 3, RELEASE))
    got = sp.acquire("m3", [(0, 9)], 3, 0, share_acquire_mode=RECORD_LIMIT)
    assert got.acquired_records == (AcquiredRecords(0, 2, 2),)
    assert sp.next_fetch_offset() == 3


def test_offsets_missing_from_the_log_between_batches_are_skipped():
    sp = make()
    sp.acquire("m", [(0, 4)], 100, 0)
    sp.acquire("m", [(10, 14)], 100, 0, fetch_offset=5)  # 5-9 are not in the log
    assert [(b.first_offset, b.last_offset) for b in sp.cached_batches()] == [(0, 4), (10, 14)]
    pending = ack(sp, "m", AB(0, 14, ACCEPT))
    assert pending.state_batches == (PSB(0, 4, 2, 1), PSB(10, 14, 2, 1))
    assert (sp.start_offset, sp.cached_batches()) == (15, [])


def test_renew_and_release_in_one_batch_and_a_failed_write():
    sp = make()
    sp.acquire("m", [(0, 3)], 100, 0)
    pending = sp.acknowledge("m", named(sp, AB(0, 3, RENEW, RELEASE, RENEW, ACCEPT)), 500)
    assert pending.state_batches == (PSB(1, 1, 0, 1), PSB(3, 3, 2, 1))
    sp.rollback(pending)
    # The renewals stand (nothing to persist for them); the rest is held again as before.
    assert sp.record_states() == {0: (ACQUIRED, 1, "m", 500 + LOCK), 1: (ACQUIRED, 1, "m", LOCK),
                                  2: (ACQUIRED, 1, "m", 500 + LOCK), 3: (ACQUIRED, 1, "m", LOCK)}
    assert sp.expire(LOCK).state_batches == (PSB(1, 1, 0, 1), PSB(3, 3, 0, 1))


def test_a_release_at_an_older_member_epoch_leaves_what_the_member_acquired_after_joining_again():
    """The member was fenced at epoch 3 and joined again (epoch 5) before the release reached
    the SharePartition: the release gives back only what it held at epoch 3."""
    sp = make()
    old = sp.acquire("m", [(0, 4)], 100, 0, member_epoch=3)
    new = sp.acquire("m", [(5, 9)], 100, 0, member_epoch=5)
    pending = sp.release_member("m", 10, member_epoch=3)
    assert pending.state_batches == (PSB(0, 4, 0, 0),)
    sp.commit(pending)
    assert sp.record_states()[5] == (ACQUIRED, 1, "m", LOCK)
    expect_error(Errors.INVALID_RECORD_STATE, sp.acknowledge, "m",
                 [AcknowledgementBatch(0, 4, (int(ACCEPT),), old.acquisition_id)], 20)
    sp.commit(sp.acknowledge("m", [AcknowledgementBatch(5, 9, (int(ACCEPT),), new.acquisition_id)], 20))
    # A release with no epoch (the member left) gives back everything it holds.
    sp.acquire("m", [(0, 4)], 100, 30, member_epoch=7)
    assert sp.release_member("m", 40).state_batches == (PSB(0, 4, 0, 0),)  # both deliveries given back
