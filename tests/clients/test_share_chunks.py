"""The share consumer's buffer keeps fetched records in their log batches until a poll hands
them out: what the user gets is the same records, delivery counts and order, and offsets
acquired without a record are acknowledged as GAP."""
from __future__ import annotations

from runtime.clients.share_fetch import ShareFetchBook, records_of
from runtime.clients.types import TopicPartition
from runtime.errors import Errors
from runtime.messages.share import (NO_ACQUISITION, AcknowledgeType, AcquiredRecords, ShareFetchableTopicResponse,
                                    ShareFetchResponse, ShareFetchResponsePartition)
from runtime.messages.topics import FetchedBatch
from runtime.topics.data import encode_records

TP = TopicPartition("t", 0)
SETTINGS = {"fetch_max_wait_ms": 500, "fetch_min_bytes": 1, "max_partition_fetch_bytes": 1 << 20,
            "max_poll_records": 500}


def _batch(base: int, values: list[bytes]) -> FetchedBatch:
    return FetchedBatch(base, base + len(values) - 1, encode_records([(base + i, None, v, []) for i, v in enumerate(values)]))


DELIVERY = 7  # the acquisition id of the fetched records


def _fetched(book: ShareFetchBook, batches, acquired, membership: int = 0, arrived_ms: float = 0,
             lock_ms: int = -1, acquisition_id: int = DELIVERY) -> None:
    """A fetch answered at `arrived_ms`, with `lock_ms` left on the locks of what it acquired."""
    part = book.partitions[TP]
    response = ShareFetchResponse(acquisition_lock_timeout_ms=30_000, responses=(ShareFetchableTopicResponse(
        "id", (ShareFetchResponsePartition(0, records=tuple(batches),
                                           acquired_records=tuple(AcquiredRecords(*a) for a in acquired),
                                           acquisition_id=acquisition_id, lock_remaining_ms=lock_ms),)),))
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
    named = book.screen({TP: {0: AcknowledgeType.ACCEPT, 3: AcknowledgeType.ACCEPT}}, 0)[TP]
    request, acks = book.fetch_request(TP, named, 0, 0)
    assert acks == {0: (AcknowledgeType.ACCEPT, DELIVERY), 1: (AcknowledgeType.GAP, DELIVERY),
                    2: (AcknowledgeType.GAP, DELIVERY), 3: (AcknowledgeType.ACCEPT, DELIVERY)}
    (batch,) = request.topics[0].partitions[0].acknowledgement_batches
    assert (batch.first_offset, batch.last_offset, batch.acquisition_id) == (0, 3, DELIVERY)



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
    """Once the lock the response named has run out, the book answers an acknowledgement
    INVALID_RECORD_STATE, as the SharePartition would, without sending it."""
    book = _book()
    _fetched(book, [_batch(0, [b"a", b"b", b"c"])], [(0, 2, 1)], arrived_ms=1000, lock_ms=500)
    assert [r.offset for r in records_of(book.drain(10, 0))] == [0, 1, 2]  # handed out, even late
    assert book.screen({TP: {0: AcknowledgeType.ACCEPT}}, 1499) == {TP: {0: (AcknowledgeType.ACCEPT, DELIVERY)}}
    # 7 was never handed out: it names no delivery, and the SharePartition refuses it.
    assert book.screen({TP: {1: AcknowledgeType.ACCEPT, 2: AcknowledgeType.REJECT, 7: AcknowledgeType.ACCEPT}},
                       1500) == {TP: {7: (AcknowledgeType.ACCEPT, NO_ACQUISITION)}}
    [refused] = book.take_results()
    assert (refused.partition, refused.offsets, refused.error.error) == (TP, (1, 2), Errors.INVALID_RECORD_STATE)
    assert book.held == {TP: {}}


def test_the_lock_is_what_the_answer_says_is_left_of_it():
    """The SharePartition acquired the records and answered much later (a slow state write
    held the answer): the book's lock ends when the answer said, not a full lock after it."""
    book = _book()
    _fetched(book, [_batch(0, [b"a"])], [(0, 0, 1)], arrived_ms=1000, lock_ms=300)
    book.drain(10, 0)
    assert book.held == {TP: {0: (DELIVERY, 1300)}}
    assert book.screen({TP: {0: AcknowledgeType.ACCEPT}}, 1300) == {}
    [refused] = book.take_results()
    assert refused.error.error is Errors.INVALID_RECORD_STATE


def test_each_acknowledgement_names_the_delivery_it_was_handed_out_in():
    """The same offsets handed out twice (the first lock ran out, this member acquired them
    again): an acknowledgement sent for the first names the first, so the SharePartition can
    refuse it for the second."""
    book = _book()
    _fetched(book, [_batch(0, [b"a", b"b"])], [(0, 1, 1)], acquisition_id=1)
    book.drain(10, 0)
    first = book.screen({TP: {0: AcknowledgeType.ACCEPT}}, 0)
    _fetched(book, [_batch(0, [b"a", b"b"])], [(0, 1, 2)], acquisition_id=2)
    book.drain(10, 0)
    second = book.screen({TP: {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.ACCEPT}}, 0)
    assert first == {TP: {0: (AcknowledgeType.ACCEPT, 1)}}
    assert second == {TP: {0: (AcknowledgeType.ACCEPT, 2), 1: (AcknowledgeType.ACCEPT, 2)}}


def test_a_partition_is_not_fetched_while_its_acknowledgement_is_under_way():
    """commit_async sends a ShareAcknowledge; the next poll's fetch of that partition waits for
    its answer, so acknowledgements and fetches of a partition reach the SharePartition in order."""
    book = _book()
    fetchable = {TP}
    book.partitions[TP].acknowledging = 1
    assert book.idle(fetchable) == []
    route = book.route({TP: {0: (AcknowledgeType.ACCEPT, DELIVERY)}}, fetchable)
    assert (route.fetch, route.alone) == ({}, {TP: {0: (AcknowledgeType.ACCEPT, DELIVERY)}})
    book.partitions[TP].acknowledging = 0
    assert book.idle(fetchable) == [TP]
    # A renewal goes now, answered in the poll; the partition is fetched after it.
    route = book.route({TP: {0: (AcknowledgeType.RENEW, DELIVERY)}}, fetchable)
    assert (route.renew, route.fetch) == ({TP: {0: (AcknowledgeType.RENEW, DELIVERY)}}, {})


def test_a_partition_is_not_fetched_again_while_its_records_wait_in_the_buffer():
    """Were it fetched, a lock that ran out in the buffer would let the new fetch acquire a
    buffered record again, and one poll would hand out both deliveries of that offset (a user
    acknowledging each was told the second was 'already acknowledged')."""
    book = _book()
    fetchable = {TP}
    assert book.idle(fetchable) == [TP]
    _fetched(book, [_batch(0, [b"a", b"b", b"c"])], [(0, 2, 1)], lock_ms=500)
    assert book.idle(fetchable) == []
    route = book.route({TP: {7: (AcknowledgeType.ACCEPT, DELIVERY)}}, fetchable)
    assert (route.fetch, route.alone) == ({}, {TP: {7: (AcknowledgeType.ACCEPT, DELIVERY)}})  # sent on their own
    book.drain(2, 0)
    assert book.idle(fetchable) == []  # one record still waits
    book.drain(2, 0)
    assert book.idle(fetchable) == [TP]
    route = book.route({TP: {0: (AcknowledgeType.ACCEPT, DELIVERY)}}, fetchable)
    assert (route.fetch, route.alone) == ({TP: {0: (AcknowledgeType.ACCEPT, DELIVERY)}}, {})
