"""A consumer's fetch positions without Ray: the offset reset policy, what a fetched batch
list delivers (control batches and aborted transactions skipped for read_committed, as
Kafka's FetchCollector does), seeks fencing older fetches, pause, and the drain order."""
from __future__ import annotations

import pytest

from runtime.clients.fetch import FetchOutcome, FetchPositions, NoOffsetForPartitionError, deliverable, reset_timestamp
from runtime.clients.types import OffsetAndMetadata, TopicPartition as TP
from runtime.errors import Errors, KafkaError
from runtime.messages.topics import (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED, AbortedTransaction,
                                     FetchedBatch, FetchResponse)
from runtime.topics.data import encode_control, encode_records

SETTINGS = {"isolation_level": "read_uncommitted", "max_poll_records": 3, "max_partition_fetch_bytes": 1 << 20,
            "fetch_max_wait_ms": 500, "fetch_min_bytes": 1}
T0, T1 = TP("t", 0), TP("t", 1)


def batch(base: int, count: int, producer_id: int = -1, transactional: bool = False) -> FetchedBatch:
    return FetchedBatch(base, base + count - 1, encode_records((0, None, f"v{base + i}".encode(), ())
                                                             for i in range(count)), producer_id, transactional)


def marker(offset: int, producer_id: int, commit: bool) -> FetchedBatch:
    return FetchedBatch(offset, offset, encode_control(commit, 0, 0), producer_id, True, True)


def response(*batches, aborted=(), error=Errors.NONE, tp=T0) -> FetchResponse:
    return FetchResponse(tp.topic, tp.partition, error.code, batches=tuple(batches),
                         aborted_transactions=tuple(aborted))


def offsets(rows) -> list[int]:
    """The offsets of drained rows, (offset, timestamp, key, value, headers)."""
    return [offset for offset, *_ in rows]


# ---------------------------------------------------------------------- the reset policy

def test_the_reset_policy():
    assert reset_timestamp("earliest", [T0]) == EARLIEST_TIMESTAMP
    assert reset_timestamp("latest", [T0]) == LATEST_TIMESTAMP
    with pytest.raises(NoOffsetForPartitionError) as e:
        reset_timestamp("none", [T1, T0])
    assert e.value.partitions == (T0, T1)


# ---------------------------------------------------------------------- what a fetch delivers

def test_records_before_the_fetch_offset_are_not_delivered_again():
    records, next_offset = deliverable(response(batch(0, 3), batch(3, 2)), 2, read_committed=False)
    assert offsets(records) == [2, 3, 4] and next_offset == 5


def test_read_committed_skips_aborted_transactions_and_markers_but_moves_past_them():
    # producer 7 aborts 2..3 (marker at 4); producer 8 commits 5 (marker at 6); 7 again, plain, at 7
    fetched = response(batch(0, 2), batch(2, 2, 7, True), marker(4, 7, False), batch(5, 1, 8, True),
                       marker(6, 8, True), batch(7, 1), aborted=[AbortedTransaction(7, 2)])
    records, next_offset = deliverable(fetched, 0, read_committed=True)
    assert offsets(records) == [0, 1, 5, 7] and next_offset == 8
    # read_uncommitted sees the aborted records too, never the markers
    records, next_offset = deliverable(fetched, 0, read_committed=False)
    assert offsets(records) == [0, 1, 2, 3, 5, 7] and next_offset == 8


def test_a_fetch_that_ends_in_a_marker_still_moves_the_fetch_offset():
    records, next_offset = deliverable(response(marker(10, 7, True)), 10, read_committed=True)
    assert records == [] and next_offset == 11


# ---------------------------------------------------------------------- positions

def positions(**settings) -> FetchPositions:
    p = FetchPositions({**SETTINGS, **settings})
    p.add([T0, T1])
    return p


def test_positions_come_from_the_committed_offset_else_the_reset_one():
    p = positions()
    assert p.missing_positions([T0, T1]) == [T0, T1]
    assert p.fetch_request(T0) is None  # nothing to fetch before a position is known
    p.initialize({T0: OffsetAndMetadata(7)}, {T1: 2})
    assert (p.owned(T0).position, p.owned(T1).position) == (7, 2)
    assert p.fetch_request(T0).fetch_offset == 7
    assert p.consumed() == {T0: OffsetAndMetadata(7), T1: OffsetAndMetadata(2)}


def test_a_read_committed_consumer_asks_for_committed_data():
    p = positions(isolation_level="read_committed")
    p.initialize({}, {T0: 0, T1: 0})
    assert p.fetch_request(T0).isolation_level == READ_COMMITTED


def test_a_seek_drops_the_buffer_and_the_answers_to_fetches_made_before_it():
    p = positions()
    p.initialize({}, {T0: 0, T1: 0})
    epoch = p.epoch(T0)
    assert p.on_fetch_response(T0, epoch, response(batch(0, 2))).added == 2
    new_epoch = p.seek(T0, 10)
    assert p.on_fetch_response(T0, epoch, response(batch(2, 2))).outcome is FetchOutcome.STALE
    assert p.drain(10) == {} and p.fetch_request(T0).fetch_offset == 10
    assert p.on_fetch_response(T0, new_epoch, response(batch(10, 1))).outcome is FetchOutcome.DATA
    assert offsets(p.drain(10)[T0]) == [10] and p.consumed()[T0] == OffsetAndMetadata(11)


def test_bad_seeks_and_partitions_not_owned_are_refused():
    p = positions()
    with pytest.raises(KafkaError) as e:
        p.seek(T0, -1)
    assert e.value.error is Errors.INVALID_REQUEST
    with pytest.raises(KafkaError):
        p.seek(TP("other", 0), 1)
    with pytest.raises(KafkaError):
        p.pause([T0, TP("other", 0)], True)
    assert p.paused() == set()  # nothing paused by a refused call


def test_out_of_range_resets_unless_a_seek_came_first():
    p = positions()
    p.initialize({}, {T0: 5, T1: 0})
    epoch = p.epoch(T0)
    assert p.on_fetch_response(T0, epoch, response(error=Errors.OFFSET_OUT_OF_RANGE)).outcome is \
        FetchOutcome.OUT_OF_RANGE
    p.reset(T0, epoch, 2)
    assert p.owned(T0).position == 2
    p.seek(T0, 9)
    p.reset(T0, epoch, 2)  # the reset was for the old position
    assert p.owned(T0).position == 9
    assert p.on_fetch_response(T0, p.epoch(T0), response(error=Errors.NOT_LEADER_OR_FOLLOWER)).outcome is \
        FetchOutcome.RETRY


def test_a_paused_or_full_partition_is_not_fetched_and_not_drained():
    p = positions()
    p.initialize({}, {T0: 0, T1: 0})
    p.on_fetch_response(T0, p.epoch(T0), response(batch(0, 3)))
    assert p.fetch_request(T0) is None  # max_poll_records buffered: poll makes room first
    p.pause([T1], True)
    assert p.fetch_request(T1) is None and p.paused() == {T1}
    p.on_fetch_response(T1, p.epoch(T1), response(batch(0, 1), tp=T1))
    assert set(p.drain(10)) == {T0}
    p.pause([T1], False)
    assert set(p.drain(10)) == {T1}


def test_the_drain_takes_partitions_in_turn():
    p = positions()
    p.initialize({}, {T0: 0, T1: 0})
    p.on_fetch_response(T0, p.epoch(T0), response(batch(0, 3)))
    p.on_fetch_response(T1, p.epoch(T1), response(batch(0, 3), tp=T1))
    first = p.drain(2)
    second = p.drain(2)
    assert len(first) == len(second) == 1 and set(first) != set(second)


def test_a_dropped_partition_answers_nothing():
    p = positions()
    p.initialize({}, {T0: 0, T1: 0})
    epoch = p.epoch(T0)
    p.drop([T0])
    assert p.epoch(T0) is None and T0 not in p
    assert p.on_fetch_response(T0, epoch, response(batch(0, 1))).outcome is FetchOutcome.STALE


def test_the_partitions_that_got_records_longest_ago_come_first():
    p = positions()
    p.initialize({}, {T0: 0, T1: 0})
    assert p.last_fed("t", 0) == p.last_fed("t", 1) == -1 and p.last_fed("t", 9) == -1  # never, or not ours
    p.on_fetch_response(T0, p.epoch(T0), response(batch(0, 1)))
    assert p.last_fed("t", 1) < p.last_fed("t", 0)
    p.on_fetch_response(T1, p.epoch(T1), response(batch(0, 1), tp=T1))
    p.on_fetch_response(T0, p.epoch(T0), response(tp=T0))  # nothing new: its place stays
    assert p.last_fed("t", 0) < p.last_fed("t", 1)
