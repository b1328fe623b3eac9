"""ProducerStateManager: idempotent duplicates, sequence and epoch checks, transactions,
the last stable offset and the aborted index, rebuilt from a real partition log."""
from __future__ import annotations

import msgpack
import pytest

from runtime.errors import Errors, KafkaError
from runtime.topics.producer_state import (AbortedTxn, CompletedTxn, DuplicateBatch, ProducerAppend,
                                           ProducerStateManager, increment_sequence)

from .helpers import Partition


@pytest.fixture
def p(tmp_path):
    partition = Partition(str(tmp_path))
    yield partition
    partition.log.close()


def error_of(fn) -> Errors:
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.error


def test_plain_producers_are_not_tracked(p):
    assert p.state.validate_append(-1, -1, -1, 3, False, 0) is None
    assert p.produce(-1, -1, -1, 3) == (0, 2)
    assert p.state.producers == {} and p.state.last_stable_offset(p.hw) == 3
    assert error_of(lambda: p.state.validate_append(-1, -1, -1, 1, True, 3)) is Errors.INVALID_REQUEST


def test_a_negative_producer_id_is_no_producer_id(p):
    # Kafka's RecordBatch.hasProducerId: only ids above -1 are producers; a transactional
    # batch without one is refused.
    assert p.state.validate_append(-5, 0, 0, 1, False, 0) is None
    assert error_of(lambda: p.state.validate_append(-5, 0, 0, 1, True, 0)) is Errors.INVALID_REQUEST
    assert p.state.producers == {}


def test_in_sequence_batches_and_a_retried_batch_is_acknowledged_without_a_second_append(p):
    assert p.produce(7, 0, 0, 2) == (0, 1)
    assert p.produce(7, 0, 2, 3) == (2, 4)
    end = p.log.end_offset
    assert p.produce(7, 0, 0, 2) == (0, 1)  # a retry of the first batch
    assert p.produce(7, 0, 2, 3) == (2, 4)
    assert p.log.end_offset == end
    assert p.state.validate_append(7, 0, 5, 1, False, end) == ProducerAppend(7, 0, 5, 5, end, end, -1, False)


def test_duplicates_are_recognised_among_the_last_five_batches_only(p):
    for seq in range(6):
        p.produce(7, 0, seq)
    assert p.produce(7, 0, 1) == (1, 1)
    assert error_of(lambda: p.produce(7, 0, 0)) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_out_of_order_sequences(p):
    p.produce(7, 0, 0, 2)
    end = p.log.end_offset
    assert error_of(lambda: p.produce(7, 0, 3)) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER  # a gap
    assert error_of(lambda: p.produce(7, 0, 1)) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER  # overlaps, not a retry
    assert error_of(lambda: p.produce(7, 1, 5)) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER  # new epoch not at 0
    assert p.log.end_offset == end
    assert p.produce(7, 1, 0) == (end, end)  # a new epoch starts again at 0


def test_unknown_producers_may_start_at_any_sequence(p):
    assert p.produce(9, 4, 42) == (0, 0)
    assert p.produce(9, 4, 43) == (1, 1)


def test_sequences_wrap_at_int_max(p):
    top = 2**31 - 1
    assert increment_sequence(top - 1, 3) == 1
    p.produce(7, 0, top - 1, 2)
    assert p.produce(7, 0, 0, 1) == (2, 2)


def test_zombie_epochs_are_refused(p):
    p.produce(7, 3, 0)
    assert error_of(lambda: p.produce(7, 2, 1)) is Errors.INVALID_PRODUCER_EPOCH
    assert error_of(lambda: p.marker(7, 2, True)) is Errors.INVALID_PRODUCER_EPOCH
    assert p.log.end_offset == 1


def test_commit_moves_the_lso_and_leaves_no_aborted_range(p):
    p.produce(1, 0, 0)  # plain, offset 0
    assert p.produce(7, 0, 0, 2, txn=True) == (1, 2)
    p.produce(1, 0, 1)  # offset 3
    assert p.state.first_unstable_offset(p.hw) == 1
    assert p.state.last_stable_offset(p.hw) == 1
    assert p.marker(7, 0, True) == CompletedTxn(7, 1, 4, False)
    assert p.state.last_stable_offset(p.hw) == 5
    assert p.state.aborted_ranges(0, 5) == []


def test_abort_records_the_range_and_the_oldest_ongoing_transaction_bounds_the_lso(p):
    p.produce(7, 0, 0, 2, txn=True)  # 0-1
    p.produce(8, 0, 0, 1, txn=True)  # 2
    p.produce(7, 0, 2, 1, txn=True)  # 3
    assert p.state.last_stable_offset(p.hw) == 0
    assert p.marker(7, 0, False) == CompletedTxn(7, 0, 4, True)  # marker at 4
    assert p.state.last_stable_offset(p.hw) == 2  # producer 8 is still open
    assert p.state.last_stable_offset(1) == 1  # never past the high watermark
    p.marker(8, 0, True)  # 5
    assert p.state.last_stable_offset(p.hw) == 6
    assert p.state.aborted_ranges(0, 6) == [AbortedTxn(7, 0, 4)]
    assert p.state.aborted_ranges(5, 6) == []  # fetching after the abort marker
    assert p.state.aborted_ranges(4, 6) == [AbortedTxn(7, 0, 4)]
    p.produce(7, 0, 3, 1, txn=True)  # 6: a new transaction
    p.marker(7, 0, False)  # 7
    assert p.state.aborted_ranges(0, 1) == [AbortedTxn(7, 0, 4)]
    assert p.state.aborted_ranges(5, 8) == [AbortedTxn(7, 6, 7)]
    assert p.state.aborted_ranges(0, 8) == [AbortedTxn(7, 0, 4), AbortedTxn(7, 6, 7)]


def test_a_plain_batch_inside_a_transaction_is_refused(p):
    p.produce(7, 0, 0, txn=True)
    assert error_of(lambda: p.produce(7, 0, 1)) is Errors.INVALID_TXN_STATE


def test_a_fencing_abort_marker_bumps_the_epoch_and_fences_the_zombie(p):
    p.produce(7, 0, 0, txn=True)
    assert p.marker(7, 1, False) == CompletedTxn(7, 0, 1, True)  # the coordinator fenced epoch 0
    assert error_of(lambda: p.produce(7, 0, 1, txn=True)) is Errors.INVALID_PRODUCER_EPOCH
    assert p.produce(7, 2, 0, txn=True) == (2, 2)


def test_a_retried_marker_completes_nothing(p):
    p.produce(7, 0, 0, txn=True)
    p.marker(7, 0, True)
    assert p.marker(7, 0, True) is None
    assert p.marker(5, 0, False) is None  # a partition the producer never wrote to
    assert p.state.aborted_ranges(0, 10) == []


def test_markers_from_a_fenced_coordinator_are_refused(p):
    p.produce(7, 0, 0, txn=True)
    p.marker(7, 0, True, coordinator_epoch=3)
    assert error_of(lambda: p.marker(7, 0, False, coordinator_epoch=2)) is Errors.TRANSACTION_COORDINATOR_FENCED


def build_history(p):
    p.produce(-1, -1, -1, 2)
    p.produce(7, 0, 0, 2, txn=True)
    p.produce(8, 0, 0, 1, txn=True)
    p.produce(9, 0, 0, 3)
    p.marker(7, 0, False)
    p.produce(7, 0, 2, 1, txn=True)
    p.marker(8, 0, True)


def test_the_state_is_rebuilt_from_the_log(p):
    build_history(p)
    rebuilt = p.rebuilt()
    assert rebuilt == p.state
    assert rebuilt.last_stable_offset(p.hw) == p.state.last_stable_offset(p.hw) == 9
    assert rebuilt.aborted_ranges(0, 20) == [AbortedTxn(7, 2, 8)]
    assert rebuilt.end_offset == p.log.end_offset
    # The rebuilt state still recognises a retry and checks sequences.
    assert rebuilt.validate_append(9, 0, 0, 3, False, 99) == DuplicateBatch(5, 7)
    with pytest.raises(KafkaError):
        rebuilt.validate_append(9, 0, 7, 1, False, 99)


def test_snapshot_is_plain_data_and_loading_continues_after_it(p):
    p.produce(7, 0, 0, 2, txn=True)
    p.produce(9, 0, 0, 1)
    snapshot = msgpack.unpackb(msgpack.packb(p.state.snapshot()), strict_map_key=False)
    assert ProducerStateManager.from_snapshot(snapshot) == p.state
    p.marker(7, 0, False)
    p.produce(9, 0, 1, 1)
    assert p.rebuilt(snapshot) == p.state == p.rebuilt()


def test_idle_producers_expire_but_not_with_an_open_transaction(p):
    p.produce(7, 0, 0)  # timestamp 1
    p.produce(8, 0, 0, txn=True)  # timestamp 2
    assert p.state.remove_expired_producers(1001, expiration_ms=1000) == [7]
    assert set(p.state.producers) == {8}
    assert p.produce(7, 0, 5) == (2, 2)  # forgotten: any sequence is accepted again


def test_retention_drops_aborted_ranges_below_the_log_start(p):
    p.produce(7, 0, 0, txn=True)
    p.marker(7, 0, False)
    p.produce(7, 0, 1, txn=True)
    p.marker(7, 0, False)
    p.state.truncate_aborted_before(2)
    assert p.state.aborted == [AbortedTxn(7, 2, 3)]


# ---------------------------------------------------------------------- the LSO waits for durable markers


def test_a_finished_transaction_stays_unstable_until_the_high_watermark_passes_its_marker(p):
    # Kafka's unreplicated transactions: completeTxn keeps the transaction until the high
    # watermark moves past the marker, so the LSO never jumps ahead of a marker that a
    # failed flush could still lose, and never moves backwards.
    p.produce(1, 0, 0)  # plain, offset 0
    p.produce(7, 0, 0, 2, txn=True)  # 1-2
    p.produce(1, 0, 1)  # 3
    hw = p.hw
    assert (hw, p.state.last_stable_offset(hw)) == (4, 1)
    p.state.validate_control_marker(7, 0)
    p.state.apply_control_marker(7, 0, True, 4)  # in the log at 4, not durable yet
    assert p.state.last_stable_offset(4) == 1
    assert p.state.last_stable_offset(5) == 5  # the marker is durable: the commit is stable
    assert p.state.last_stable_offset(5) == 5 and p.state.first_unstable_offset(5) is None


def test_the_oldest_undurable_marker_and_the_oldest_ongoing_transaction_both_bound_the_lso(p):
    p.produce(7, 0, 0, 1, txn=True)  # 0
    p.produce(8, 0, 0, 1, txn=True)  # 1
    p.state.apply_control_marker(8, 0, False, 2)  # producer 8 aborted, marker not durable
    assert p.state.last_stable_offset(2) == 0
    p.state.apply_control_marker(7, 0, True, 3)
    assert p.state.last_stable_offset(3) == 0  # 7's marker is durable, 8's is not
    assert p.state.last_stable_offset(4) == 4


# ---------------------------------------------------------------------- verification (KIP-890 part 1)


def test_a_transactional_batch_that_opens_a_transaction_must_be_verified(p):
    assert error_of(lambda: p.state.validate_append(7, 0, 0, 1, True, 0)) is Errors.INVALID_TXN_STATE
    guard = p.state.verification_guard(7, 0, 0, False)
    assert error_of(lambda: p.state.validate_append(7, 0, 0, 1, True, 0, -1, object())) is Errors.INVALID_TXN_STATE
    assert p.state.last_stable_offset(p.hw) == p.hw  # nothing is open
    assert p.state.validate_append(7, 0, 0, 1, True, 0, -1, guard) == ProducerAppend(7, 0, 0, 0, 0, 0, -1, True)
    # Once the transaction is open here, its batches need no verification.
    p.produce(7, 0, 0, txn=True)
    assert p.state.verification_guard(7, 0, 1, False) is None
    assert p.state.validate_append(7, 0, 1, 1, True, 1) is not None
    # Its end drops that: the next transaction verifies again.
    p.marker(7, 0, True)
    assert p.state.verification_guard(7, 0, 1, False) is not None


def test_a_verification_answered_after_an_abort_marker_cannot_open_a_hanging_transaction(p):
    p.produce(7, 0, 0, txn=True)
    p.marker(7, 0, False)
    guard = p.state.verification_guard(7, 0, 1, False)  # the leader asks the coordinator...
    p.marker(7, 1, False)  # ...which meanwhile aborts (a fence) and writes its marker here
    end = p.log.end_offset
    assert error_of(lambda: p.state.validate_append(7, 1, 0, 1, True, end, -1, guard)) is Errors.INVALID_TXN_STATE
    assert p.state.last_stable_offset(p.hw) == p.hw


def test_batches_verifying_together_share_a_guard_and_keep_their_order(p):
    first = p.state.verification_guard(7, 0, 0, False)
    second = p.state.verification_guard(7, 0, 1, False)
    assert first is second
    # The later batch may not go before the earlier one that is still verifying.
    assert error_of(lambda: p.state.validate_append(7, 0, 1, 1, True, 0, -1, first)) is \
        Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.state.validate_append(7, 0, 0, 1, True, 0, -1, first) is not None


def test_version_2_transactions_start_at_sequence_zero_where_the_producer_is_new(p):
    # Kafka: for a transactions-version-2 producer with no state here, only sequence 0.
    guard = p.state.verification_guard(9, 4, 42, True)
    assert error_of(lambda: p.state.validate_append(9, 4, 42, 1, True, 0, -1, guard)) is \
        Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.produce(9, 4, 0, txn=True, version=2) == (0, 0)
    # Version 1 keeps the old rule: an unknown producer may start anywhere.
    assert p.produce(10, 0, 42, txn=True) == (1, 1)


def test_version_2_markers_must_carry_a_newer_epoch(p):
    # Kafka (ProducerAppendInfo.checkProducerEpoch): a version 2 marker's epoch is above the
    # producer's; the same epoch again is only a retry of a marker already written.
    p.produce(7, 3, 0, txn=True)
    assert error_of(lambda: p.marker(7, 3, True, version=2)) is Errors.INVALID_PRODUCER_EPOCH
    assert p.marker(7, 4, True, version=2) == CompletedTxn(7, 0, 1, False)
    assert p.marker(7, 4, True, version=2) is None  # the coordinator's retry
    assert error_of(lambda: p.produce(7, 3, 1, txn=True)) is Errors.INVALID_PRODUCER_EPOCH  # the zombie
    assert p.produce(7, 4, 0, txn=True, version=2) == (3, 3)  # the producer's next transaction
    assert error_of(lambda: p.marker(7, 4, False, version=2)) is Errors.INVALID_PRODUCER_EPOCH
    assert p.marker(7, 4, False) == CompletedTxn(7, 3, 4, True)  # version 1 takes the same epoch
