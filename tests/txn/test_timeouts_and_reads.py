"""Timed-out transactions, expiry of idle transactional ids, DescribeTransactions and
ListTransactions."""
from __future__ import annotations

import pytest

from runtime.errors import Errors, KafkaError
from runtime.messages.txn import (DescribeTransactionsRequest, DescribeTransactionsResponse,
                                  DescribeTransactionsTopicData, DescribeTransactionsTransactionState,
                                  ListTransactionsRequest, ListTransactionsResponse, ListTransactionsTransactionState)
from runtime.testing import ShardHarness
from runtime.txn.coordinator import TransactionCoordinatorShard, TxnMarkers
from runtime.txn.records import transaction_log_tombstone
from runtime.txn.state import TransactionState

from .helpers import add, end, finish_markers, harness, id_for_partition, init, state_of

S = TransactionState
T0 = ("orders", 0)


def test_timed_out_transactions_are_aborted_with_an_epoch_bump(tmp_path):
    h = harness(tmp_path)
    init(h, "slow", timeout_ms=5000)
    init(h, "fast", timeout_ms=60000)  # producer id 1
    add(h, "slow", 0, 0, [T0])
    add(h, "fast", 1, 0, [T0])
    h.advance(4999)
    assert h.shard.transactions["slow"].state is S.ONGOING
    h.advance(5001)  # the check every 10 s finds "slow" 10 s old
    slow = h.shard.transactions["slow"]
    # The cluster's transaction version (2) bumps for the fence and again for the abort.
    assert (slow.state, slow.producer_epoch, slow.txn_last_update_timestamp) == (S.PREPARE_ABORT, 2, 10000)
    assert h.shard.transactions["fast"].state is S.ONGOING
    assert h.read(lambda s: s.pending_markers()) == [TxnMarkers("slow", 0, 2, False, (T0,), 2)]
    # The producer learns it was fenced.
    with pytest.raises(KafkaError) as e:
        end(h, "slow", 0, 0)
    assert e.value.error is Errors.PRODUCER_FENCED
    finish_markers(h)
    assert h.shard.transactions["slow"].state is S.COMPLETE_ABORT
    h.advance(60000)
    assert h.shard.transactions["fast"].state is S.PREPARE_ABORT


def test_a_fenced_producer_resuming_with_its_old_epoch_is_fenced(tmp_path):
    h = harness(tmp_path)
    init(h, "slow", timeout_ms=1000)
    add(h, "slow", 0, 0, [T0])
    h.advance(10000)
    finish_markers(h)
    assert h.shard.transactions["slow"].producer_epoch == 2
    with pytest.raises(KafkaError) as e:
        init(h, "slow", producer_id=0, producer_epoch=0)
    assert e.value.error is Errors.PRODUCER_FENCED
    assert init(h, "slow").producer_epoch == 3


def test_timed_out_transactions_under_version_1_bump_once(tmp_path):
    h = harness(tmp_path, **{"transaction.version": 1})
    init(h, "slow", timeout_ms=1000)
    add(h, "slow", 0, 0, [T0])
    h.advance(10000)
    assert h.read(lambda s: s.pending_markers()) == [TxnMarkers("slow", 0, 1, False, (T0,), 1)]


def test_cleanup_interval_is_configurable(tmp_path):
    h = harness(tmp_path, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 100})
    init(h, timeout_ms=1000)
    add(h, "tx", 0, 0, [T0])
    h.advance(1100)
    assert h.shard.transactions["tx"].state is S.PREPARE_ABORT


def test_a_reloaded_coordinator_keeps_checking_for_timeouts(tmp_path):
    h = harness(tmp_path)
    init(h, timeout_ms=1000)
    add(h, "tx", 0, 0, [T0])
    h.reload()
    h.advance(10000)
    assert h.shard.transactions["tx"].state is S.PREPARE_ABORT


def test_idle_transactional_ids_expire_with_tombstones(tmp_path):
    h = harness(tmp_path, **{"transactional.id.expiration.ms": 5000,
                             "transaction.remove.expired.transaction.cleanup.interval.ms": 1000})
    init(h, "idle")
    init(h, "busy", timeout_ms=900000)  # producer id 1, an ongoing transaction never expires
    add(h, "busy", 1, 0, [T0])
    init(h, "done")  # producer id 2
    add(h, "done", 2, 0, [T0])
    end(h, "done", 2, 0)
    finish_markers(h)
    captured = []
    original = h.shard.expire_transactional_ids
    h.runtime.timer.schedule("transactional-id-expiration", 5000,
                             lambda now: captured.append(original(now)) or captured[-1])
    h.advance(5000)
    assert list(captured[0].records) == [transaction_log_tombstone("idle"), transaction_log_tombstone("done")]
    assert set(h.shard.transactions) == {"busy"}
    response = h.read(lambda s: s.describe_transactions(DescribeTransactionsRequest(("idle",))))
    assert response.transaction_states[0].error_code == Errors.TRANSACTIONAL_ID_NOT_FOUND.code
    before = state_of(h)
    h.reload()
    assert state_of(h) == before
    # An expired id starts afresh with a new producer id.
    assert init(h, "idle").producer_epoch == 0


def test_the_default_expiration_is_seven_days(tmp_path):
    h = harness(tmp_path, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 3600000})
    init(h)
    h.advance(604800000 - 3600000)
    assert "tx" in h.shard.transactions
    h.advance(3600000)
    assert "tx" not in h.shard.transactions


def test_describe_transactions(tmp_path):
    h = harness(tmp_path)
    init(h, "tx", timeout_ms=30000)
    h.clock.now_ms = 50
    add(h, "tx", 0, 0, [("b", 2), ("a", 1), ("a", 0)])
    response = h.read(lambda s: s.describe_transactions(DescribeTransactionsRequest(("tx", "nope", ""))))
    assert response == DescribeTransactionsResponse((
        DescribeTransactionsTransactionState(0, "tx", "Ongoing", 30000, 50, 0, 0, (
            DescribeTransactionsTopicData("a", (0, 1)), DescribeTransactionsTopicData("b", (2,)))),
        DescribeTransactionsTransactionState(Errors.TRANSACTIONAL_ID_NOT_FOUND.code, "nope"),
        DescribeTransactionsTransactionState(Errors.INVALID_REQUEST.code, "")))


def test_describe_names_ids_of_other_coordinators(tmp_path):
    h = ShardHarness(str(tmp_path), TransactionCoordinatorShard, config={"transaction.state.log.num.partitions": 50})
    other = id_for_partition(3, 50)
    response = h.read(lambda s: s.describe_transactions(DescribeTransactionsRequest((other,))))
    assert response.transaction_states[0].error_code == Errors.NOT_COORDINATOR.code


def test_list_transactions_with_filters(tmp_path):
    h = harness(tmp_path)
    init(h, "a")  # 0
    init(h, "b")  # 1
    init(h, "c")  # 2
    h.clock.now_ms = 1000
    add(h, "a", 0, 0, [T0])
    h.clock.now_ms = 5000
    add(h, "b", 1, 0, [T0])
    h.clock.now_ms = 6000

    def listing(**kw):
        return h.read(lambda s: s.list_transactions(ListTransactionsRequest(**kw), h.clock()))

    everything = listing()
    assert everything == ListTransactionsResponse(transaction_states=(
        ListTransactionsTransactionState("a", 0, "Ongoing"), ListTransactionsTransactionState("b", 1, "Ongoing"),
        ListTransactionsTransactionState("c", 2, "Empty")))
    ongoing = listing(state_filters=("Ongoing", "Bogus"))
    assert ongoing.unknown_state_filters == ("Bogus",)
    assert [t.transactional_id for t in ongoing.transaction_states] == ["a", "b"]
    assert [t.transactional_id for t in listing(producer_id_filters=(1, 2)).transaction_states] == ["b", "c"]
    long_running = listing(state_filters=("Ongoing",), duration_filter=2000)
    assert [t.transactional_id for t in long_running.transaction_states] == ["a"]
    assert [t.transactional_id for t in listing(transactional_id_pattern="[bc]").transaction_states] == ["b", "c"]
    assert listing(transactional_id_pattern="(").error_code == Errors.INVALID_REQUEST.code
