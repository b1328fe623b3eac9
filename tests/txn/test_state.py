"""The transaction state table and TransactionMetadata's prepare_* moves."""
from __future__ import annotations

import itertools

import pytest

from runtime.errors import Errors, KafkaError
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
    fenced = meta(S.ONGOING, epoch=3, last_epoch=2).prepare_fence_producer_epoch(500)
    assert (fenced.state, fenced.producer_epoch, fenced.last_producer_epoch) == (S.PREPARE_ABORT, 4, -1)
    assert fenced.topic_partitions == {("t", 0)} and fenced.txn_last_update_timestamp == 500
    with pytest.raises(KafkaError):
        meta(S.EMPTY).prepare_fence_producer_epoch(500)


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
    assert value.next_producer_id == -1
    assert TransactionMetadata.from_value("tx", value) == m
