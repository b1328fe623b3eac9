"""The transaction state table and TransactionMetadata's prepare_* moves."""
from __future__ import annotations

import itertools

import pytest

from runtime.codec import encode_records, record_type, unpack
from runtime.errors import Errors, KafkaError
from runtime.txn.records import transaction_log_record
from runtime.txn.state import (MAX_EPOCH, VALID_PREVIOUS_STATES, TransactionMetadata, TransactionState,
                               is_epoch_exhausted)

S = TransactionState


def meta(state: S, epoch: int = 3, last_epoch: int = -1, partitions=frozenset({("t", 0)})) -> TransactionMetadata:
    return TransactionMetadata("tx", 7, -1, epoch, last_epoch, 60000, state, partitions, 100, 200)


def test_kafka_valid_previous_states():
    assert VALID_PREVIOUS_STATES[S.PREPARE_EPOCH_FENCE] == {S.ONGOING}
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    assert VALID_PREVIOUS_STATES[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.PREPARE_EPOCH_FENCE in VALID_PREVIOUS_STATES[S.PREPARE_ABORT]
    assert [s.id for s in S] == list(range(8))
    assert S.from_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE and S.from_name("Nope") is None
    assert [s for s in S if s.expiration_allowed] == [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT]


@pytest.mark.parametrize("src,dst", list(itertools.product(S, S)))
def test_every_move_is_checked_by_the_table(src, dst):
    before = meta(src)
    if src in VALID_PREVIOUS_STATES[dst]:
        assert before._transition(dst).state is dst
    else:
        with pytest.raises(KafkaError) as e:
            before._transition(dst)
        assert e.value.error is Errors.INVALID_TXN_STATE
    assert before == meta(src)  # immutable: an illegal move changes nothing


def test_increment_epoch_paths():
    m = meta(S.COMPLETE_COMMIT, epoch=3, last_epoch=-1)
    fresh = m.prepare_increment_producer_epoch(5000, None, 300)
    assert (fresh.state, fresh.producer_epoch, fresh.last_producer_epoch) == (S.EMPTY, 4, -1)
    assert (fresh.topic_partitions, fresh.txn_start_timestamp, fresh.txn_timeout_ms) == (frozenset(), -1, 5000)
    resumed = m.prepare_increment_producer_epoch(5000, 3, 300)
    assert (resumed.producer_epoch, resumed.last_producer_epoch) == (4, 3)
    retry = resumed.prepare_increment_producer_epoch(5000, 3, 400)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (4, 3)
    with pytest.raises(KafkaError) as e:
        resumed.prepare_increment_producer_epoch(5000, 1, 400)
    assert e.value.error is Errors.PRODUCER_FENCED


def test_fence_goes_through_prepare_epoch_fence_to_prepare_abort():
    # Version 1: the fence's bump is the abort's epoch.
    fenced = meta(S.ONGOING, epoch=3, last_epoch=2).prepare_fence_producer_epoch(1, 500)
    assert (fenced.state, fenced.producer_epoch, fenced.last_producer_epoch) == (S.PREPARE_ABORT, 4, -1)
    assert fenced.topic_partitions == {("t", 0)} and fenced.txn_last_update_timestamp == 500
    with pytest.raises(KafkaError):
        meta(S.EMPTY).prepare_fence_producer_epoch(1, 500)


def test_version_2_fence_bumps_for_the_fence_and_again_for_the_abort():
    # Kafka: PrepareEpochFence takes epoch + 1, then the version 2 abort bumps once more
    # and remembers the fenced epoch as the last one.
    fenced = meta(S.ONGOING, epoch=3, last_epoch=2).prepare_fence_producer_epoch(2, 500)
    assert (fenced.state, fenced.producer_epoch, fenced.last_producer_epoch) == (S.PREPARE_ABORT, 5, 4)
    # Never past Short.MAX_VALUE: at the top the abort keeps the epoch.
    top = meta(S.ONGOING, epoch=MAX_EPOCH - 1).prepare_fence_producer_epoch(2, 500)
    assert (top.producer_epoch, top.last_producer_epoch) == (MAX_EPOCH, MAX_EPOCH)
    assert meta(S.ONGOING, epoch=MAX_EPOCH).prepare_fence_producer_epoch(2, 500).producer_epoch == MAX_EPOCH


def test_version_2_end_bumps_the_epoch_and_rotates_at_the_complete():
    prepared = meta(S.ONGOING, epoch=3, last_epoch=2).prepare_abort_or_commit(True, 2, -1, 600)
    assert (prepared.state, prepared.producer_epoch, prepared.last_producer_epoch,
            prepared.client_transaction_version) == (S.PREPARE_COMMIT, 4, 3, 2)
    done = prepared.prepare_complete(700)
    assert (done.state, done.producer_id, done.producer_epoch, done.topic_partitions) == (
        S.COMPLETE_COMMIT, 7, 4, frozenset())
    # The last epoch: the Prepare reaches Short.MAX_VALUE, the Complete moves to the next id.
    worn = meta(S.ONGOING, epoch=MAX_EPOCH - 1).prepare_abort_or_commit(False, 2, 42, 600)
    assert (worn.producer_id, worn.producer_epoch, worn.next_producer_id) == (7, MAX_EPOCH, 42)
    rotated = worn.prepare_complete(700)
    assert (rotated.producer_id, rotated.previous_producer_id, rotated.producer_epoch, rotated.last_producer_epoch,
            rotated.next_producer_id) == (42, 7, 0, MAX_EPOCH - 1, -1)
    # Version 1 keeps the epoch.
    v1 = meta(S.ONGOING, epoch=3, last_epoch=2).prepare_abort_or_commit(True, 1, -1, 600)
    assert (v1.producer_epoch, v1.last_producer_epoch) == (3, 2)
    # Version 2 may abort with no partition added: the transaction starts then.
    empty = meta(S.COMPLETE_COMMIT, epoch=3, partitions=frozenset()).prepare_abort_or_commit(False, 2, -1, 900, True)
    assert (empty.state, empty.producer_epoch, empty.txn_start_timestamp) == (S.PREPARE_ABORT, 4, 900)


def test_a_negative_producer_id_is_refused():
    # Kafka's prepareTransitionTo refuses an illegal new producer id.
    with pytest.raises(ValueError):
        meta(S.EMPTY).prepare_producer_id_rotation(-1, 1000, 5, False)


def test_epoch_exhaustion_keeps_one_epoch_for_fencing():
    assert not is_epoch_exhausted(MAX_EPOCH - 2)
    assert is_epoch_exhausted(MAX_EPOCH - 1) and is_epoch_exhausted(MAX_EPOCH)
    with pytest.raises(ValueError):
        meta(S.EMPTY, epoch=MAX_EPOCH - 1).prepare_increment_producer_epoch(1000, None, 0)
    rotated = meta(S.EMPTY, epoch=MAX_EPOCH - 1).prepare_producer_id_rotation(99, 1000, 5, True)
    assert (rotated.producer_id, rotated.previous_producer_id, rotated.producer_epoch,
            rotated.last_producer_epoch) == (99, 7, 0, MAX_EPOCH - 1)


def test_record_round_trip():
    m = TransactionMetadata("tx", 7, 3, 2, 1, 60000, S.ONGOING, frozenset({("b", 1), ("a", 2), ("a", 0)}), 10, 20)
    value = m.to_value()
    assert value.topic_partitions == (("a", (0, 2)), ("b", (1,)))
    assert (value.next_producer_id, value.client_transaction_version) == (-1, 0)
    assert TransactionMetadata.from_value("tx", value) == m
    v2 = TransactionMetadata("tx", 7, 3, 32767, 32766, 60000, S.PREPARE_ABORT, frozenset(), 10, 20, 8, 2)
    assert TransactionMetadata.from_value("tx", v2.to_value()) == v2
    # A record written before client_transaction_version existed reads as version 0.
    _, _, key, fields = unpack(encode_records([transaction_log_record("tx", value)]))[0]
    older = record_type(30).decode(key, fields[:-1])
    assert older.value.client_transaction_version == 0 and not TransactionMetadata.from_value(
        "tx", older.value).supports_epoch_bump
