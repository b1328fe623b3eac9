"""A SharePartition's reads of its partition leader (runtime.share.reads), with a manual
clock: min bytes, the high watermark and the last stable offset, the log start offset moving,
aborted transactions, which log batches go back."""
from __future__ import annotations

import pytest

from runtime.errors import Errors, KafkaError
from runtime.messages.share import AcquiredRecords
from runtime.messages.topics import (READ_COMMITTED, READ_UNCOMMITTED, AbortedTransaction, FetchedBatch,
                                     FetchResponse)
from runtime.share.reads import LeaderRead, acquire_from_read, read_request
from runtime.share_state.records import RecordState
from runtime.topics.data import encode_control, encode_records

from .test_share_partition import make, snapshot

PAYLOAD = encode_records([(0, None, b"v")])  # the payload's size is what min_bytes counts


def batch(base, last, **kw):
    return FetchedBatch(base, last, PAYLOAD, **kw)


def answer(*batches, hw=10, lso=None, start=0, error=0, aborted=()):
    return FetchResponse("t", 0, error, hw, hw if lso is None else lso, start, tuple(batches), tuple(aborted))


def take(sp, response, *, min_bytes=1, waiting=True, max_records=500, member="m"):
    request = read_request(sp, "t", 0, 1 << 20, max_records)
    return acquire_from_read(sp, member, request, response, min_bytes=min_bytes, waiting=waiting,
                             max_records=max_records, batch_size=None, share_acquire_mode=0, now_ms=1000)


def test_the_read_asks_from_the_next_fetch_offset_with_the_groups_isolation():
    sp = make(start=5)
    request = read_request(sp, "t", 0, 1 << 40, 100)
    assert (request.fetch_offset, request.isolation_level, request.max_records) == (5, READ_UNCOMMITTED, 100)
    assert request.partition_max_bytes == 64 << 20
    committed = make({"share.isolation.level": "read_committed"})
    assert read_request(committed, "t", 0, 1024, 10).isolation_level == READ_COMMITTED


def test_records_are_acquired_and_their_batches_go_back():
    sp = make()
    b1, b2 = batch(0, 4), batch(5, 9)
    got = take(sp, answer(b1, b2), max_records=500)
    assert got == LeaderRead((AcquiredRecords(0, 9, 1),), (b1, b2), 10, sp.acquisition_of(0), 1000 + sp.record_lock_duration_ms)
    assert {state for state, _, _, _ in sp.record_states().values()} == {RecordState.ACQUIRED}


def test_fewer_bytes_than_min_bytes_wait_while_the_fetch_may_wait():
    sp = make()
    before = snapshot(sp)
    got = take(sp, answer(batch(0, 4)), min_bytes=10 * len(PAYLOAD))
    assert got == LeaderRead(end=0) and snapshot(sp) == before  # wait for more from offset 0
    got = take(sp, answer(batch(0, 4)), min_bytes=10 * len(PAYLOAD), waiting=False)
    assert got.acquired == (AcquiredRecords(0, 4, 1),)


def test_an_empty_read_knows_the_end_of_the_log_is_the_fetch_offset():
    sp = make(start=3)
    assert take(sp, answer(hw=3)) == LeaderRead(end=3)


def test_a_read_below_the_log_start_takes_the_start_offset_up_and_acquires_nothing():
    sp = make()
    got = take(sp, answer(error=Errors.OFFSET_OUT_OF_RANGE.code, start=7, hw=12))
    assert got == LeaderRead() and sp.start_offset == 7 and sp.next_fetch_offset() == 7


def test_other_errors_are_raised_and_change_nothing():
    sp = make()
    before = snapshot(sp)
    with pytest.raises(KafkaError) as e:
        take(sp, answer(error=Errors.NOT_LEADER_OR_FOLLOWER.code))
    assert e.value.error is Errors.NOT_LEADER_OR_FOLLOWER and snapshot(sp) == before
    # out of range above the log start is an error too: the log start did not move past it
    with pytest.raises(KafkaError):
        take(sp, answer(error=Errors.OFFSET_OUT_OF_RANGE.code, start=0))
    assert snapshot(sp) == before


def test_read_committed_stops_at_the_last_stable_offset_and_archives_aborted_batches():
    sp = make({"share.isolation.level": "read_committed"})
    aborted = batch(0, 2, producer_id=7, is_transactional=True)
    marker = FetchedBatch(3, 3, encode_control(False, 0, 0), producer_id=7, is_transactional=True, is_control=True)
    kept, open_txn = batch(4, 5), batch(6, 8, producer_id=9, is_transactional=True)
    got = take(sp, answer(aborted, marker, kept, open_txn, hw=9, lso=6, aborted=[AbortedTransaction(7, 0)]))
    assert got.end == 6  # the last stable offset, not the high watermark
    assert [(r.first_offset, r.last_offset) for r in got.acquired] == [(4, 5)]
    assert got.batches == (kept,)  # neither the marker nor the aborted batch goes back
    # the aborted records and the marker are archived, so the group's start offset passes them
    assert sp.start_offset == 4 and set(sp.record_states()) == {4, 5}  # 6 is past the last stable offset
