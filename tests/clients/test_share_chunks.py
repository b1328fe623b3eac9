"""The share consumer's buffer keeps fetched records in their log batches until a poll hands
them out: what the user gets is the same records, delivery counts and order, and offsets
acquired without a record are acknowledged as GAP."""
from __future__ import annotations

from runtime.clients.share_fetch import ShareFetchBook, records_of
from runtime.clients.types import TopicPartition
from runtime.errors import Errors
from runtime.messages.share import (AcknowledgeType, AcquiredRecords, ShareFetchableTopicResponse,
                                    ShareFetchResponse, ShareFetchResponsePartition)
from runtime.messages.topics import FetchedBatch
from runtime.topics.data import encode_records

TP = TopicPartition("t", 0)
SETTINGS = {"fetch_max_wait_ms": 500, "fetch_min_bytes": 1, "max_partition_fetch_bytes": 1 << 20,
            "max_poll_records": 500}


def _batch(base: int, values: list[bytes]) -> FetchedBatch:
    return FetchedBatch(base, base + len(values) - 1, encode_records([(base + i, None, v, []) for i, v in enumerate(values)]))


def _fetched(book: ShareFetchBook, batches, acquired, membership: int = 0, arrived_ms: float = 0,
             lock_ms: int = 0) -> None:
    part = book.partitions[TP]
    response = ShareFetchResponse(acquisition_lock_timeout_ms=lock_ms, responses=(ShareFetchableTopicResponse(
        "id", (ShareFetchResponsePartition(0, records=tuple(batches),
                                           acquired_records=tuple(AcquiredRecords(*a) for a in acquired)),)),))
    request, acks = book.fetch_request(TP, {}, 0, membership)
    book.on_fetch_response(part, acks, response, arrived_ms)


def _book() -> ShareFetchBook:
    book = ShareFetchBook("g", "m", SETTINGS)
    book.subscribe([("t", "id", 0)])
    return book


def test_polls_split_batches_and_keep_order_and_delivery_counts():
    book = _book()
    _fetched(book, [_batch(0, [b"a", b"b", b"c"]), _batch(3, [b"d", b"e"])], [(0, 1, 1), (2, 4, 3)])
    assert book.buffered == 5
    first = records_of(book.drain(2, 0))
    second = records_of(book.drain(2, 0))
    third = records_of(book.drain(2, 0))
    assert [(r.offset, r.value, r.delivery_count) for r in first] == [(0, b"a", 1), (1, b"b", 1)]
    assert [(r.offset, r.value, r.delivery_count) for r in second] == [(2, b"c", 3), (3, b"d", 3)]
    assert [(r.offset, r.value, r.delivery_count) for r in third] == [(4, b"e", 3)]
    assert book.buffered == 0 and book.drain(2, 0) == []


def test_only_acquired_offsets_of_a_batch_are_handed_out():
    book = _book()
    _fetched(book, [_batch(0, [b"a", b"b", b"c", b"d"])], [(1, 2, 2)])
    assert [(r.offset, r.value) for r in records_of(book.drain(10, 0))] == [(1, b"b"), (2, b"c")]


def test_acquired_offsets_without_a_record_are_acknowledged_as_gaps():
    book = _book()
    _fetched(book, [_batch(0, [b"a"]), _batch(3, [b"d"])], [(0, 3, 1)])
    assert [r.offset for r in records_of(book.drain(10, 0))] == [0, 3]
    request, acks = book.fetch_request(TP, {0: AcknowledgeType.ACCEPT, 3: AcknowledgeType.ACCEPT}, 0, 0)
    assert acks == {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.GAP, 2: AcknowledgeType.GAP,
                    3: AcknowledgeType.ACCEPT}



def test_records_of_an_earlier_membership_are_never_handed_out():
    """A member the group lost had what it held given back (its delivery not counted): another
    member may hold those records with the same delivery count, so the buffer drops them."""
    book = _book()
    _fetched(book, [_batch(0, [b"a", b"b", b"c"])], [(0, 2, 1)], membership=1)
    assert [r.offset for r in records_of(book.drain(1, 1))] == [0]
    assert book.has_records(1)
    assert not book.has_records(None) and book.buffered == 0 and book.dropped == 2  # fenced


def test_a_stale_batch_is_skipped_and_later_ones_still_handed_out():
    book = _book()
    _fetched(book, [_batch(0, [b"a"])], [(0, 0, 1)], membership=1)
    _fetched(book, [_batch(1, [b"b"])], [(1, 1, 1)], membership=2)
    assert [r.offset for r in records_of(book.drain(10, 2))] == [1]
    assert book.dropped == 1 and book.buffered == 0


def test_an_acknowledgement_after_the_lock_ran_out_is_answered_here_and_not_sent():
    """Once the lock the response named has run out, this member's next fetch may have
    acquired the record again, and the SharePartition would take the stale acknowledgement for
    the new delivery: the book answers it INVALID_RECORD_STATE instead."""
    book = _book()
    _fetched(book, [_batch(0, [b"a", b"b", b"c"])], [(0, 2, 1)], arrived_ms=1000, lock_ms=500)
    assert [r.offset for r in records_of(book.drain(10, 0))] == [0, 1, 2]  # handed out, even late
    assert book.screen({TP: {0: AcknowledgeType.ACCEPT}}, 1499) == {TP: {0: AcknowledgeType.ACCEPT}}
    assert book.screen({TP: {1: AcknowledgeType.ACCEPT, 2: AcknowledgeType.REJECT, 7: AcknowledgeType.ACCEPT}},
                       1500) == {TP: {7: AcknowledgeType.ACCEPT}}  # 7 was never handed out: the SharePartition judges
    [refused] = book.take_results()
    assert (refused.partition, refused.offsets, refused.error.error) == (TP, (1, 2), Errors.INVALID_RECORD_STATE)
    assert book.locked == {TP: {}}


def test_a_partition_is_not_fetched_again_while_its_records_wait_in_the_buffer():
    """Were it fetched, a lock that ran out in the buffer would let the new fetch acquire a
    buffered record again, and one poll would hand out both deliveries of that offset (a user
    acknowledging each was told the second was 'already acknowledged')."""
    book = _book()
    fetchable = {TP}
    assert book.idle(fetchable) == [TP]
    _fetched(book, [_batch(0, [b"a", b"b", b"c"])], [(0, 2, 1)], lock_ms=500)
    assert book.idle(fetchable) == []
    route = book.route({TP: {7: AcknowledgeType.ACCEPT}}, fetchable)
    assert (route.fetch, route.alone) == ({}, {TP: {7: AcknowledgeType.ACCEPT}})  # sent on their own
    book.drain(2, 0)
    assert book.idle(fetchable) == []  # one record still waits
    book.drain(2, 0)
    assert book.idle(fetchable) == [TP]
    route = book.route({TP: {0: AcknowledgeType.ACCEPT}}, fetchable)
    assert (route.fetch, route.alone) == ({TP: {0: AcknowledgeType.ACCEPT}}, {})
