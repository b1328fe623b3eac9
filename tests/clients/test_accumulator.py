"""The producer's accumulator without Ray, from Kafka's RecordAccumulator and Sender: batches
close at batch.size or after linger.ms; a partition's batches leave in order, at most
max.in.flight at once; an idempotent batch is numbered once and keeps its sequence on every
retry; a batch that overtook an unacknowledged one and was refused goes again behind it;
and, against leaders that apply the runtime's own sequence rules, no delivery order or lost
answer writes a record twice or out of order."""
from __future__ import annotations

import random

import pytest

from runtime.clients.accumulator import Outcome, RecordAccumulator, backoff_ms
from runtime.errors import Errors, KafkaError

from .producer_harness import ProducerHarness

RETRIABLE = KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, "moving")


def error(e: Errors) -> KafkaError:
    return KafkaError(e, e.name)


# ---------------------------------------------------------------------- batching


def test_a_batch_is_sent_when_full_or_after_linger_and_not_before():
    h = ProducerHarness(idempotent=False, batch_size=30, linger_ms=10)
    h.send(b"a" * 10)
    h.advance(9)
    assert h.sender_step() == []
    h.advance(1)
    (lingered,) = h.sender_step()
    assert lingered.entries == [b"a" * 10]
    first = h.send(b"b" * 20)
    second = h.send(b"c" * 20)  # would pass batch_size: a new batch
    assert first is not second and first.is_sealed and not second.is_sealed
    third = h.send(b"d" * 10)  # fills the open batch: sealed at once
    assert third is second and second.is_sealed
    assert h.sender_step() == [first, second]


def test_a_record_larger_than_the_batch_size_gets_a_batch_of_its_own():
    h = ProducerHarness(idempotent=False, batch_size=8)
    small = h.send(b"x")
    big = h.send(b"y" * 20)
    assert small is not big and big.entries == [b"y" * 20] and big.is_sealed


def test_flush_seals_every_open_batch_and_waits_for_its_answer():
    acc = RecordAccumulator(linger_ms=1000)
    batch, _, new = acc.append("t", 0, b"r", 0, 0)
    assert new and acc.has_incomplete() and acc.next_wake_ms(0) == 1000
    acc.seal_all()
    assert acc.drain(0) == [batch] and acc.has_incomplete()
    assert acc.on_response(batch, None, 7, 0) is Outcome.ACKNOWLEDGED
    assert batch.base_offset == 7 and not acc.has_incomplete()


def test_a_request_to_a_node_takes_along_its_other_partitions_open_batches():
    """Kafka's drain: once one partition's batch goes to a node, the open batches of that
    node's other partitions go in the same request, lingered or not; another node's wait."""
    node = {("t", 0): "a", ("t", 1): "a", ("t", 2): "b", ("t", 3): "a"}.get
    acc = RecordAccumulator(linger_ms=5, max_in_flight=1)
    first = acc.append("t", 0, b"r", 0, 0)[0]
    along = acc.append("t", 1, b"r", 0, 3)[0]
    elsewhere = acc.append("t", 2, b"r", 0, 3)[0]
    assert acc.drain(4, node) == []  # nothing lingered yet: nothing goes
    acc.seal_lingered(5)
    assert acc.drain(5, node) == [first, along] and along.is_sealed and not elsewhere.is_sealed
    # A partition with no room (its one batch in flight) keeps its open batch for later.
    assert acc.on_response(first, None, 0, 6) is Outcome.ACKNOWLEDGED
    second = acc.append("t", 0, b"r", 0, 6)[0]
    blocked = acc.append("t", 1, b"r", 0, 7)[0]
    third = acc.append("t", 3, b"r", 0, 7)[0]
    acc.seal_lingered(11)
    assert set(acc.drain(11, node)) == {elsewhere, second, third} and not blocked.is_sealed
    # Without node_of, only what lingered goes (the gateway's and a test's callers).
    acc2 = RecordAccumulator(linger_ms=5)
    lingered = acc2.append("t", 0, b"r", 0, 0)[0]
    acc2.append("t", 1, b"r", 0, 3)
    acc2.seal_lingered(5)
    assert acc2.drain(5) == [lingered]


def test_a_transaction_hears_of_each_partition_as_its_first_batch_opens():
    acc = RecordAccumulator(track_new_partitions=True)
    acc.append("t", 0, b"a", 0, 0)
    acc.append("t", 0, b"b", 0, 0)
    acc.append("t", 1, b"c", 0, 0)
    assert acc.take_new_partitions() == {("t", 0), ("t", 1)}
    assert acc.take_new_partitions() == set()


# ---------------------------------------------------------------------- in flight, in order


def test_at_most_max_in_flight_batches_per_partition():
    h = ProducerHarness(idempotent=False, batch_size=1, max_in_flight=2)
    for v in (b"1", b"2", b"3"):
        h.send(v)
    h.send(b"x", partition=1)
    sent = h.sender_step()
    assert [(b.partition, b.entries) for b in sent] == [(0, [b"1"]), (0, [b"2"]), (1, [b"x"])]
    assert h.sender_step() == []
    h.arrive(sent[0])
    assert [b.entries for b in h.sender_step()] == [[b"3"]]


def test_an_idempotent_partition_sends_one_batch_until_its_first_is_acknowledged():
    # A leader takes any first sequence from a producer it does not know, so a second batch
    # arriving first would be written before the first.
    h = ProducerHarness(batch_size=1)
    for v in (b"1", b"2", b"3"):
        h.send(v)
    (first,) = h.sender_step()
    assert h.sender_step() == []
    h.arrive(first)
    assert [b.entries for b in h.sender_step()] == [[b"2"], [b"3"]]
    # A leader that died may have lost everything of ours: one at a time again.
    h.arrive()
    h.arrive()
    h.accumulator.leader_lost(("t", 0))
    h.send(b"4")
    h.send(b"5")
    assert [b.entries for b in h.sender_step()] == [[b"4"]]


def test_a_version_2_transaction_starts_every_partition_at_sequence_zero_so_needs_no_wait():
    h = ProducerHarness(transactional_id="tx", batch_size=1)
    assert h.txn.starts_at_sequence_zero
    for v in (b"1", b"2"):
        h.send(v)
    assert len(h.sender_step()) == 2


# ---------------------------------------------------------------------- sequences


def test_a_retried_batch_keeps_its_producer_id_epoch_and_sequence():
    h = ProducerHarness(batch_size=2, retry_backoff_ms=100)
    first = h.send(b"aa")
    (sent,) = h.sender_step()
    assert (sent.producer_id, sent.producer_epoch, sent.base_sequence) == (1000, 0, 0)
    assert h.arrive(lose_answer=True) is Outcome.RETRY  # written, answer lost
    second = h.send(b"bb")
    h.advance(100)
    resent = h.sender_step()
    assert resent == [first]  # the retry goes first, alone (its partition is not acknowledged)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (1000, 0, 0)
    assert h.arrive() is Outcome.ACKNOWLEDGED and first.base_offset == 0  # the original offsets
    (sent,) = h.sender_step()
    assert sent is second and second.base_sequence == 1  # one record: the next sequence
    h.arrive()
    assert h.leader().log == [b"aa", b"bb"]


def test_partitions_are_numbered_apart_and_a_new_epoch_starts_them_at_zero():
    acc = RecordAccumulator(idempotent=True, batch_size=1)
    batches = [acc.append("t", p, b"x" * n, 0, 0)[0] for p, n in ((0, 1), (0, 1), (1, 1))]
    acc.number(batches, 5, 0)
    assert [b.base_sequence for b in batches] == [0, 1, 0]
    later = acc.append("t", 0, b"y", 0, 0)[0]
    acc.number([later], 5, 1)
    assert later.base_sequence == 0


def test_retries_back_off_exponentially_until_the_delivery_timeout():
    h = ProducerHarness(idempotent=False, batch_size=1, retry_backoff_ms=100, retry_backoff_max_ms=300,
                        delivery_timeout_ms=1000)
    batch = h.send(b"x")
    waits = []
    for _ in range(3):
        h.sender_step()
        assert h.answer(batch, RETRIABLE) is Outcome.RETRY
        waits.append(batch.retry_at_ms - h.clock())
        h.advance(int(waits[-1]) - 1)
        assert h.sender_step() == []  # still backing off
        h.advance(1)
    assert waits == [backoff_ms(0, 100, 300), 200, 300] == [100, 200, 300]
    h.advance(1000)
    h.sender_step()
    assert h.answer(batch, RETRIABLE) is Outcome.FAILED and batch.error.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_a_batch_waiting_for_its_retry_holds_back_the_ones_behind_it():
    h = ProducerHarness(idempotent=False, batch_size=1)
    first, second = h.send(b"1"), h.send(b"2")
    h.sender_step()
    h.answer(first, RETRIABLE)
    h.answer(second, RETRIABLE)
    h.advance(1000)
    assert h.sender_step() == [first, second]


@pytest.mark.parametrize("e", [Errors.MESSAGE_TOO_LARGE, Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED])
def test_a_non_retriable_error_fails_the_batch(e):
    h = ProducerHarness(batch_size=1)
    batch = h.send(b"x")
    h.sender_step()
    assert h.answer(batch, error(e)) is Outcome.FAILED and batch.error.error is e
    assert not h.accumulator.has_incomplete()


# ---------------------------------------------------------------------- out of order


def test_a_batch_that_overtook_an_unacknowledged_one_goes_again_at_once_behind_it():
    h = ProducerHarness(batch_size=1, max_in_flight=5)
    first = h.send(b"1")
    h.sender_step()
    h.arrive()
    second, third = h.send(b"2"), h.send(b"3")
    assert h.sender_step() == [second, third]
    assert h.arrive(third) is Outcome.RETRY  # a gap for the leader: it has not seen 2 yet
    assert third.retry_at_ms == h.clock() and third.base_sequence == 2
    assert h.arrive(second) is Outcome.ACKNOWLEDGED
    assert h.sender_step() == [third]
    assert h.arrive() is Outcome.ACKNOWLEDGED
    assert h.leader().log == [b"1", b"2", b"3"] and first.base_offset == 0


def test_out_of_order_behind_a_batch_that_failed_for_good_is_a_gap_and_fails():
    h = ProducerHarness(batch_size=1, max_in_flight=5, delivery_timeout_ms=100)
    h.send(b"1")
    h.sender_step()
    h.arrive()
    second, third = h.send(b"2"), h.send(b"3")
    h.sender_step()
    h.advance(100)  # past the delivery timeout: no more retries
    assert h.answer(second, RETRIABLE) is Outcome.FAILED
    assert h.arrive(third) is Outcome.FAILED and third.error.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_duplicate_is_taken_as_success_without_offsets():
    h = ProducerHarness(batch_size=1)
    batch = h.send(b"1")
    h.sender_step()
    assert h.answer(batch, error(Errors.DUPLICATE_SEQUENCE_NUMBER)) is Outcome.ACKNOWLEDGED
    assert batch.base_offset == -1


def test_unknown_producer_id_fails_the_batch_and_restarts_its_partition_at_zero():
    h = ProducerHarness(batch_size=1)
    h.send(b"1")
    h.sender_step()
    h.arrive()
    batch = h.send(b"2")
    h.sender_step()
    assert batch.base_sequence == 1
    assert h.answer(batch, error(Errors.UNKNOWN_PRODUCER_ID)) is Outcome.FAILED
    nxt = h.send(b"3")
    h.sender_step()
    assert nxt.base_sequence == 0


# ---------------------------------------------------------------------- against the leader's rules


@pytest.mark.parametrize("seed", range(40))
def test_no_delivery_order_or_lost_answer_writes_a_record_twice_or_out_of_order(seed):
    """Ray may deliver a caller's calls out of order and an answer may be lost (a leader
    killed after its append): the log still holds every record once, in send order."""
    rng = random.Random(seed)
    h = ProducerHarness(batch_size=1, max_in_flight=5, retry_backoff_ms=10, delivery_timeout_ms=10**9)
    values = [(rng.randrange(2), b"%d" % i) for i in range(40)]
    pending = list(values)
    while pending or h.wire or h.accumulator.has_incomplete():
        for _ in range(rng.randint(0, 3)):
            if pending:
                partition, value = pending.pop(0)
                h.send(value, partition=partition)
        h.advance(rng.randint(0, 10))
        h.sender_step()
        if h.wire:
            h.arrive(rng.choice(h.wire), lose_answer=rng.random() < 0.2)
    assert h.failed == []
    for p in (0, 1):
        assert h.leader("t", p).log == [v for q, v in values if q == p]


def test_a_retried_idempotent_batch_goes_alone():
    """Where shoal differs (README): Ray does not keep a caller's calls in order, so nothing
    goes behind a retry until it is answered; later batches could otherwise push it out of
    the five batches a leader remembers, and the leader would refuse a batch it has."""
    h = ProducerHarness(batch_size=1, max_in_flight=5, retry_backoff_ms=10)
    h.send(b"0")
    h.sender_step()
    h.arrive()
    first = h.send(b"1")
    h.sender_step()
    assert h.arrive(lose_answer=True) is Outcome.RETRY  # in the log, the answer lost
    for v in (b"2", b"3"):
        h.send(v)
    h.advance(10)
    assert h.sender_step() == [first]
    assert h.sender_step() == []
    assert h.arrive() is Outcome.ACKNOWLEDGED and first.base_offset == 1
    assert [b.entries for b in h.sender_step()] == [[b"2"], [b"3"]]


def test_after_a_sent_batch_fails_for_good_the_next_epoch_starts_every_partition_at_zero():
    """Kafka's idempotent producer bumps its own epoch once the failed batch's partition
    has nothing in the air; the leader takes a higher epoch from sequence 0."""
    h = ProducerHarness(batch_size=1, delivery_timeout_ms=50)
    h.send(b"0")
    h.sender_step()
    h.arrive()
    lost = h.send(b"1")
    h.sender_step()
    h.wire.clear()  # never arrives
    h.advance(50)
    assert h.answer(lost, RETRIABLE) is Outcome.FAILED  # past the delivery timeout: a gap at sequence 1
    nxt = h.send(b"2")
    h.sender_step()
    assert (nxt.producer_id, nxt.producer_epoch, nxt.base_sequence) == (lost.producer_id, 1, 0)
    assert h.arrive() is Outcome.ACKNOWLEDGED
    assert h.leader().log == [b"0", b"2"]
