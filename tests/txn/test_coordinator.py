"""TransactionCoordinatorShard: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
its markers, with a manual clock over the real runtime and log."""
from __future__ import annotations

import pytest

from runtime.codec import Record
from runtime.coordinator import Result
from runtime.errors import Errors, KafkaError
from runtime.messages.txn import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnPartitionResult,
                                  AddPartitionsToTxnResponse, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
                                  EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse,
                                  WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest)
from runtime.testing import ShardHarness
from runtime.txn.coordinator import TransactionCoordinatorShard, TxnMarkers
from runtime.txn.records import (ProducerIdBlockKey, ProducerIdBlockValue,
                                 TransactionLogPartitions, TransactionLogValue, transaction_log_record)
from runtime.txn.state import TransactionState

from .helpers import add, add_request, end, finish_markers, harness, id_for_partition, init, run, state_of

S = TransactionState
T0, T1 = ("orders", 0), ("orders", 1)


def txn(h, tid="tx"):
    return h.shard.transactions[tid]


def raises(error, fn):
    with pytest.raises(KafkaError) as e:
        fn()
    assert e.value.error is error, e.value


def init_op(tid="tx", timeout=60000, pid=-1, epoch=-1):
    return lambda s, now: s.init_producer_id(InitProducerIdRequest(tid, timeout, pid, epoch), now)


# ---------------------------------------------------------------------- producer ids


def test_idempotent_producer_ids_come_from_blocks_never_reused_after_restart(tmp_path):
    h = harness(tmp_path)
    records, pending = run(h, init_op(None))
    assert pending.result() == InitProducerIdResponse(producer_id=0, producer_epoch=0)
    assert records == [Record(ProducerIdBlockKey(0), ProducerIdBlockValue(0, 1000))]
    records, pending = run(h, init_op(None))
    assert (records, pending.result().producer_id) == ([], 1)
    h.reload()
    records, pending = run(h, init_op(None))
    assert pending.result().producer_id == 1000  # the rest of block 0 may have been handed out
    assert records == [Record(ProducerIdBlockKey(0), ProducerIdBlockValue(1000, 1000))]


def test_blocks_are_striped_over_coordinator_partitions(tmp_path):
    h = ShardHarness(str(tmp_path), TransactionCoordinatorShard, partition=2,
                     config={"transaction.state.log.num.partitions": 3})
    assert h.call(init_op(None)).producer_id == 2000
    h.reload()
    assert h.call(init_op(None)).producer_id == 5000


# ---------------------------------------------------------------------- InitProducerId


def test_first_init_creates_the_transactional_id(tmp_path):
    h = harness(tmp_path)
    h.clock.now_ms = 1000
    records, pending = run(h, init_op("tx", 30000))
    assert pending.result() == InitProducerIdResponse(producer_id=0, producer_epoch=0)
    assert records == [Record(ProducerIdBlockKey(0), ProducerIdBlockValue(0, 1000)),
                       transaction_log_record("tx", TransactionLogValue(0, -1, -1, 0, -1, 30000, S.EMPTY.id, (),
                                                                        1000, -1))]
    assert txn(h).state is S.EMPTY


def test_init_again_bumps_the_epoch_and_retries_get_the_same_answer(tmp_path):
    h = harness(tmp_path)
    assert init(h) == InitProducerIdResponse(producer_id=0, producer_epoch=0)
    assert init(h) == InitProducerIdResponse(producer_id=0, producer_epoch=1)
    assert (txn(h).producer_epoch, txn(h).last_producer_epoch) == (1, -1)
    # A producer that knows its id and epoch resumes: the last epoch is remembered ...
    assert init(h, producer_id=0, producer_epoch=1) == InitProducerIdResponse(producer_id=0, producer_epoch=2)
    assert (txn(h).producer_epoch, txn(h).last_producer_epoch) == (2, 1)
    # ... so that its retry gets the same epoch instead of fencing itself.
    assert init(h, producer_id=0, producer_epoch=1) == InitProducerIdResponse(producer_id=0, producer_epoch=2)
    before = state_of(h)
    raises(Errors.PRODUCER_FENCED, lambda: init(h, producer_id=0, producer_epoch=0))
    raises(Errors.PRODUCER_FENCED, lambda: init(h, producer_id=55, producer_epoch=2))
    assert state_of(h) == before
    h.reload()
    assert state_of(h) == before


def test_init_rejects_bad_requests(tmp_path):
    h = harness(tmp_path, **{"transaction.max.timeout.ms": 10000})
    raises(Errors.INVALID_TRANSACTION_TIMEOUT, lambda: init(h, timeout_ms=10001))
    raises(Errors.INVALID_TRANSACTION_TIMEOUT, lambda: init(h, timeout_ms=0))
    raises(Errors.INVALID_REQUEST, lambda: init(h, tid=""))
    raises(Errors.INVALID_REQUEST, lambda: init(h, producer_id=3))
    raises(Errors.INVALID_REQUEST, lambda: init(h, producer_epoch=0))
    raises(Errors.INVALID_REQUEST, lambda: init(h, producer_id=-5))  # a producer id without an epoch
    assert h.shard.transactions == {}
    assert init(h, timeout_ms=10000).producer_epoch == 0


def test_init_refuses_a_negative_producer_id_only_where_kafka_does(tmp_path):
    # KafkaApis refuses only a pair with exactly one of them -1; any other pair is the
    # producer's own, and one the coordinator does not know is fenced.
    h = harness(tmp_path)
    assert init(h, producer_id=-5, producer_epoch=0) == InitProducerIdResponse(producer_id=0, producer_epoch=0)
    raises(Errors.PRODUCER_FENCED, lambda: init(h, producer_id=-5, producer_epoch=0))
    raises(Errors.INVALID_REQUEST, lambda: init(h, producer_id=-1, producer_epoch=0))
    assert txn(h).producer_epoch == 0


def test_default_max_timeout_is_fifteen_minutes(tmp_path):
    h = harness(tmp_path)
    raises(Errors.INVALID_TRANSACTION_TIMEOUT, lambda: init(h, timeout_ms=900001))
    assert init(h, timeout_ms=900000).producer_epoch == 0


def test_ids_of_other_coordinator_partitions_are_refused(tmp_path):
    h = ShardHarness(str(tmp_path), TransactionCoordinatorShard, config={"transaction.state.log.num.partitions": 50})
    other, mine = id_for_partition(7, 50), id_for_partition(0, 50)
    raises(Errors.NOT_COORDINATOR, lambda: init(h, tid=other))
    assert init(h, tid=mine).producer_epoch == 0


def test_init_fences_an_ongoing_transaction_and_aborts_it_under_version_1(tmp_path):
    h = harness(tmp_path, **{"transaction.version": 1})
    init(h)
    add(h, "tx", 0, 0, [T0])
    h.clock.now_ms = 500
    records, pending = run(h, init_op())
    assert pending.result() == InitProducerIdResponse(error_code=Errors.CONCURRENT_TRANSACTIONS.code)
    assert records == [transaction_log_record("tx", TransactionLogValue(
        0, -1, -1, 1, -1, 60000, S.PREPARE_ABORT.id, (TransactionLogPartitions("orders", (0,)),), 500, 0, 1))]
    assert h.read(lambda s: s.pending_markers()) == [TxnMarkers("tx", 0, 1, False, (T0,))]
    # The zombie can do nothing more.
    raises(Errors.PRODUCER_FENCED, lambda: end(h, "tx", 0, 0, version=1).result())
    raises(Errors.PRODUCER_FENCED, lambda: h.call(lambda s, now: s.add_offsets_to_txn(
        AddOffsetsToTxnRequest("tx", 0, 0, "g"), now)))
    # The new producer retries while the abort completes.
    raises(Errors.CONCURRENT_TRANSACTIONS, lambda: init(h))
    finish_markers(h)
    assert txn(h).state is S.COMPLETE_ABORT
    assert init(h) == InitProducerIdResponse(producer_id=0, producer_epoch=2)


def test_init_fences_an_ongoing_transaction_and_aborts_it(tmp_path):
    # Version 2 (the default): the fencing abort takes the cluster's version, so it bumps
    # for the fence and again for the abort, and the markers carry that epoch.
    h = harness(tmp_path)
    init(h)
    add(h, "tx", 0, 0, [T0])
    h.clock.now_ms = 500
    records, pending = run(h, init_op())
    assert pending.result() == InitProducerIdResponse(error_code=Errors.CONCURRENT_TRANSACTIONS.code)
    assert records == [transaction_log_record("tx", TransactionLogValue(
        0, -1, -1, 2, 1, 60000, S.PREPARE_ABORT.id, (TransactionLogPartitions("orders", (0,)),), 500, 0, 2))]
    assert h.read(lambda s: s.pending_markers()) == [TxnMarkers("tx", 0, 2, False, (T0,), 2)]
    raises(Errors.PRODUCER_FENCED, lambda: end(h, "tx", 0, 0).result())
    raises(Errors.CONCURRENT_TRANSACTIONS, lambda: init(h))
    finish_markers(h)
    assert init(h) == InitProducerIdResponse(producer_id=0, producer_epoch=3)


def test_epoch_overflow_rotates_the_producer_id(tmp_path):
    h = harness(tmp_path)
    init(h)  # producer id 0
    worn = TransactionLogValue(0, -1, -1, 32765, -1, 60000, S.COMPLETE_COMMIT.id, (), 0, 0)
    h.call(lambda s, now: Result([transaction_log_record("tx", worn)]))
    assert init(h) == InitProducerIdResponse(producer_id=0, producer_epoch=32766)
    # 32766 is exhausted: the next init starts a new producer id at epoch 0.
    assert init(h, producer_id=0, producer_epoch=32766) == InitProducerIdResponse(producer_id=1, producer_epoch=0)
    t = txn(h)
    assert (t.producer_id, t.previous_producer_id, t.last_producer_epoch) == (1, 0, 32766)
    # A retry that never saw the rotation names the old id with the exhausted epoch.
    assert init(h, producer_id=0, producer_epoch=32766) == InitProducerIdResponse(producer_id=1, producer_epoch=0)
    raises(Errors.PRODUCER_FENCED, lambda: init(h, producer_id=0, producer_epoch=5))


def test_fencing_at_the_last_epoch_then_rotating(tmp_path):
    h = harness(tmp_path)
    init(h)
    ongoing = TransactionLogValue(0, -1, -1, 32766, -1, 60000, S.ONGOING.id,
                                  (TransactionLogPartitions("orders", (0,)),), 0, 0)
    h.call(lambda s, now: Result([transaction_log_record("tx", ongoing)]))
    assert init(h).error_code == Errors.CONCURRENT_TRANSACTIONS.code
    assert txn(h).producer_epoch == 32767
    finish_markers(h)
    assert init(h) == InitProducerIdResponse(producer_id=1, producer_epoch=0)


# ---------------------------------------------------------------------- AddPartitionsToTxn, AddOffsetsToTxn


def _result(tid, error, partitions):
    topics: dict[str, list[int]] = {}
    for topic, p in partitions:
        topics.setdefault(topic, []).append(p)
    return AddPartitionsToTxnResult(tid, tuple(AddPartitionsToTxnTopicResult(
        t, tuple(AddPartitionsToTxnPartitionResult(p, error.code) for p in ps)) for t, ps in topics.items()))


def test_add_partitions_starts_and_extends_the_transaction(tmp_path):
    h = harness(tmp_path)
    init(h)
    h.clock.now_ms = 100
    records, pending = run(h, lambda s, now: s.add_partitions_to_txn(add_request("tx", 0, 0, [T0]), now))
    assert pending.result() == AddPartitionsToTxnResponse(results_by_transaction=(_result("tx", Errors.NONE, [T0]),))
    assert records == [transaction_log_record("tx", TransactionLogValue(
        0, -1, -1, 0, -1, 60000, S.ONGOING.id, (TransactionLogPartitions("orders", (0,)),), 100, 100))]
    h.clock.now_ms = 200
    records, _ = run(h, lambda s, now: s.add_partitions_to_txn(add_request("tx", 0, 0, [T0]), now))
    assert records == []  # already in the transaction
    records, _ = run(h, lambda s, now: s.add_partitions_to_txn(add_request("tx", 0, 0, [T1, ("x", 3)]), now))
    t = txn(h)
    assert (t.state, t.topic_partitions, t.txn_start_timestamp, t.txn_last_update_timestamp) == (
        S.ONGOING, {T0, T1, ("x", 3)}, 100, 200)
    before = state_of(h)
    h.reload()
    assert state_of(h) == before


def test_add_partitions_errors_per_transaction(tmp_path):
    h = harness(tmp_path)
    init(h, "a")
    init(h, "b")  # producer id 1
    add(h, "b", 1, 0, [T0])
    end(h, "b", 1, 0)  # PrepareCommit at epoch 1
    request = add_request("a", 0, 0, [T0])
    request = type(request)(request.transactions
                            + add_request("a", 0, 7, [T1]).transactions
                            + add_request("a", 9, 0, [T1]).transactions
                            + add_request("nobody", 0, 0, [T1]).transactions
                            + add_request("b", 1, 1, [T1]).transactions
                            + add_request("", 0, 0, [T1]).transactions)
    response = h.call(lambda s, now: s.add_partitions_to_txn(request, now))
    assert response.results_by_transaction == (
        _result("a", Errors.NONE, [T0]),
        _result("a", Errors.PRODUCER_FENCED, [T1]),
        _result("a", Errors.INVALID_PRODUCER_ID_MAPPING, [T1]),
        _result("nobody", Errors.INVALID_PRODUCER_ID_MAPPING, [T1]),
        _result("b", Errors.CONCURRENT_TRANSACTIONS, [T1]),
        _result("", Errors.INVALID_REQUEST, [T1]))
    assert txn(h, "a").topic_partitions == {T0}


def test_verify_only_answers_each_partition_without_adding(tmp_path):
    # Kafka's handleVerifyPartitionsInTransaction: past the producer id, epoch and
    # completion checks, NONE for a partition in the transaction and TRANSACTION_ABORTABLE
    # for one that is not, whatever the state.
    h = harness(tmp_path)
    init(h)

    def verify(parts, epoch=0, pid=0, tid="tx"):
        return h.call(lambda s, now: s.add_partitions_to_txn(
            add_request(tid, pid, epoch, parts, verify_only=True), now)).results_by_transaction[0]

    def answers(parts, **kw):
        return {(t.name, p.partition_index): Errors.for_code(p.partition_error_code)
                for t in verify(parts, **kw).topic_results for p in t.results_by_partition}

    assert answers([T0]) == {T0: Errors.TRANSACTION_ABORTABLE}  # Empty: no transaction
    add(h, "tx", 0, 0, [T0])
    assert answers([T0, T1, ("x", 2)]) == {T0: Errors.NONE, T1: Errors.TRANSACTION_ABORTABLE,
                                           ("x", 2): Errors.TRANSACTION_ABORTABLE}
    assert verify([T0], epoch=3) == _result("tx", Errors.PRODUCER_FENCED, [T0])
    assert verify([T0], pid=9) == _result("tx", Errors.INVALID_PRODUCER_ID_MAPPING, [T0])
    assert verify([T0], tid="nobody") == _result("nobody", Errors.INVALID_PRODUCER_ID_MAPPING, [T0])
    assert txn(h).topic_partitions == {T0}
    end(h, "tx", 0, 0)  # PrepareCommit at epoch 1
    assert verify([T0], epoch=1) == _result("tx", Errors.CONCURRENT_TRANSACTIONS, [T0])
    finish_markers(h)
    assert answers([T0], epoch=1) == {T0: Errors.TRANSACTION_ABORTABLE}  # CompleteCommit: not any more


def test_add_offsets_adds_the_groups_offsets_partition(tmp_path):
    h = harness(tmp_path)
    init(h)
    response = h.call(lambda s, now: s.add_offsets_to_txn(AddOffsetsToTxnRequest("tx", 0, 0, "testgroup"), now))
    assert response == AddOffsetsToTxnResponse()
    assert txn(h).topic_partitions == {("__consumer_offsets", 27)}
    raises(Errors.INVALID_REQUEST, lambda: h.call(lambda s, now: s.add_offsets_to_txn(
        AddOffsetsToTxnRequest("tx", 0, 0, ""), now)))
    raises(Errors.PRODUCER_FENCED, lambda: h.call(lambda s, now: s.add_offsets_to_txn(
        AddOffsetsToTxnRequest("tx", 0, 1, "g"), now)))


# ---------------------------------------------------------------------- EndTxn


def test_commit_is_two_phase_and_answers_after_the_markers_under_version_1(tmp_path):
    h = harness(tmp_path)
    init(h)
    add(h, "tx", 0, 0, [T1, T0])
    h.clock.now_ms = 300
    records, pending = run(h, lambda s, now: s.end_txn(EndTxnRequest("tx", 0, 0, True, 1), now))
    assert records == [transaction_log_record("tx", TransactionLogValue(
        0, -1, -1, 0, -1, 60000, S.PREPARE_COMMIT.id, (TransactionLogPartitions("orders", (0, 1)),), 300, 0, 1))]
    assert not pending.done
    assert h.read(lambda s: s.pending_markers()) == [TxnMarkers("tx", 0, 0, True, (T0, T1))]
    raises(Errors.CONCURRENT_TRANSACTIONS, lambda: end(h, "tx", 0, 0, version=1).result())
    raises(Errors.INVALID_TXN_STATE, lambda: end(h, "tx", 0, 0, commit=False, version=1).result())
    assert add(h, "tx", 0, 0, [T0]).results_by_transaction == (_result("tx", Errors.CONCURRENT_TRANSACTIONS, [T0]),)
    h.clock.now_ms = 400
    # The markers are durable: the commit is visible, so EndTxn is answered before the
    # Complete record is written.
    records, _ = run(h, lambda s, now: s.markers_written("tx"))
    assert records == [] and pending.result() == EndTxnResponse()
    records, done = run(h, lambda s, now: s.complete_markers("tx", 0, 0, now))
    assert records == [transaction_log_record("tx", TransactionLogValue(
        0, -1, -1, 0, -1, 60000, S.COMPLETE_COMMIT.id, (), 400, 0, 1))]
    assert h.read(lambda s: s.pending_markers()) == []
    # A retry of the completed commit succeeds with nothing to write; an abort cannot.
    records, retry = run(h, lambda s, now: s.end_txn(EndTxnRequest("tx", 0, 0, True, 1), now))
    assert (records, retry.result()) == ([], EndTxnResponse())
    raises(Errors.INVALID_TXN_STATE, lambda: end(h, "tx", 0, 0, commit=False, version=1).result())
    raises(Errors.INVALID_TXN_STATE, lambda: h.call(lambda s, now: s.complete_markers("tx", 0, 0, now)))
    # The next transaction starts from CompleteCommit.
    h.clock.now_ms = 500
    add(h, "tx", 0, 0, [T1])
    assert (txn(h).state, txn(h).txn_start_timestamp, txn(h).topic_partitions) == (S.ONGOING, 500, {T1})


def test_abort_under_version_1(tmp_path):
    h = harness(tmp_path)
    init(h)
    add(h, "tx", 0, 0, [T0])
    pending = end(h, "tx", 0, 0, commit=False, version=1)
    assert txn(h).state is S.PREPARE_ABORT
    raises(Errors.CONCURRENT_TRANSACTIONS, lambda: end(h, "tx", 0, 0, commit=False, version=1).result())
    raises(Errors.INVALID_TXN_STATE, lambda: end(h, "tx", 0, 0, commit=True, version=1).result())
    finish_markers(h)
    assert pending.result() == EndTxnResponse()
    assert txn(h).state is S.COMPLETE_ABORT
    assert end(h, "tx", 0, 0, commit=False, version=1).result() == EndTxnResponse()
    raises(Errors.INVALID_TXN_STATE, lambda: end(h, "tx", 0, 0, commit=True, version=1).result())
    # Version 1 has no abort without a transaction.
    init(h, producer_id=0, producer_epoch=0)
    raises(Errors.INVALID_TXN_STATE, lambda: end(h, "tx", 0, 1, commit=False, version=1).result())


def test_version_2_commit_bumps_the_epoch_and_answers_with_it(tmp_path):
    # KIP-890 part 2: PrepareCommit carries epoch + 1 (the markers are written with it) and
    # EndTxn v5 answers with the producer id and epoch to go on with.
    h = harness(tmp_path)
    init(h)
    add(h, "tx", 0, 0, [T1, T0])
    h.clock.now_ms = 300
    records, pending = run(h, lambda s, now: s.end_txn(EndTxnRequest("tx", 0, 0, True), now))
    assert records == [transaction_log_record("tx", TransactionLogValue(
        0, -1, -1, 1, 0, 60000, S.PREPARE_COMMIT.id, (TransactionLogPartitions("orders", (0, 1)),), 300, 0, 2))]
    assert h.read(lambda s: s.pending_markers()) == [TxnMarkers("tx", 0, 1, True, (T0, T1), 2)]
    assert TxnMarkers("tx", 0, 1, True, (T0,), 2).requests_by_partition()[T0].markers[0].transaction_version == 2
    raises(Errors.CONCURRENT_TRANSACTIONS, lambda: end(h, "tx", 0, 0).result())  # a retry
    raises(Errors.PRODUCER_FENCED, lambda: end(h, "tx", 0, 1).result())  # the epoch it was not told yet
    raises(Errors.PRODUCER_FENCED, lambda: h.call(lambda s, now: s.add_offsets_to_txn(
        AddOffsetsToTxnRequest("tx", 0, 0, "g"), now)))
    h.clock.now_ms = 400
    h.write(lambda s, now: s.markers_written("tx"))
    assert pending.result() == EndTxnResponse(producer_id=0, producer_epoch=1)
    records, _ = run(h, lambda s, now: s.complete_markers("tx", 0, 1, now))
    assert records == [transaction_log_record("tx", TransactionLogValue(
        0, -1, -1, 1, 0, 60000, S.COMPLETE_COMMIT.id, (), 400, 0, 2))]
    # A retry with the old epoch gets the same answer; the new epoch cannot commit nothing.
    assert end(h, "tx", 0, 0).result() == EndTxnResponse(producer_id=0, producer_epoch=1)
    raises(Errors.INVALID_TXN_STATE, lambda: end(h, "tx", 0, 1).result())
    raises(Errors.INVALID_TXN_STATE, lambda: end(h, "tx", 0, 0, commit=False).result())
    # The old epoch is fenced for the next transaction; the new one starts it.
    assert add(h, "tx", 0, 0, [T0]).results_by_transaction == (_result("tx", Errors.PRODUCER_FENCED, [T0]),)
    add(h, "tx", 0, 1, [T0])
    assert (txn(h).state, txn(h).producer_epoch) == (S.ONGOING, 1)
    before = state_of(h)
    h.reload()
    assert state_of(h) == before


def test_version_2_abort_without_a_transaction_bumps_the_epoch(tmp_path):
    # Kafka's table for Empty, CompleteAbort and CompleteCommit under version 2: an abort
    # with the current epoch bumps it (an empty transaction, no markers), a retry of the
    # finished outcome answers NONE, anything else is INVALID_TXN_STATE or PRODUCER_FENCED.
    h = harness(tmp_path)
    init(h)
    raises(Errors.INVALID_TXN_STATE, lambda: end(h, "tx", 0, 0).result())  # Empty: nothing to commit
    h.clock.now_ms = 700
    aborted = end(h, "tx", 0, 0, commit=False)
    t = txn(h)
    assert (t.state, t.producer_epoch, t.topic_partitions, t.txn_start_timestamp) == (S.PREPARE_ABORT, 1, set(), 700)
    assert h.read(lambda s: s.pending_markers()) == [TxnMarkers("tx", 0, 1, False, (), 2)]
    finish_markers(h)
    assert aborted.result() == EndTxnResponse(producer_id=0, producer_epoch=1)
    assert end(h, "tx", 0, 0, commit=False).result() == EndTxnResponse(producer_id=0, producer_epoch=1)  # retry
    raises(Errors.INVALID_TXN_STATE, lambda: end(h, "tx", 0, 0, commit=True).result())
    raises(Errors.PRODUCER_FENCED, lambda: end(h, "tx", 0, 5, commit=False).result())
    # CompleteAbort, current epoch: another empty abort.
    again = end(h, "tx", 0, 1, commit=False)
    finish_markers(h)
    assert again.result() == EndTxnResponse(producer_id=0, producer_epoch=2)
    # Empty after InitProducerId: a retry (epoch - 1) is fenced.
    init(h, producer_id=0, producer_epoch=2)
    assert txn(h).state is S.EMPTY and txn(h).producer_epoch == 3
    raises(Errors.PRODUCER_FENCED, lambda: end(h, "tx", 0, 2, commit=False).result())


def test_version_2_epoch_overflow_rotates_the_producer_id_at_the_end(tmp_path):
    h = harness(tmp_path)
    init(h)  # producer id 0; the block's next id is 1
    worn = TransactionLogValue(0, -1, -1, 32766, 32765, 60000, S.ONGOING.id,
                               (TransactionLogPartitions("orders", (0,)),), 0, 0, 2)
    h.call(lambda s, now: Result([transaction_log_record("tx", worn)]))
    h.clock.now_ms = 50
    records, pending = run(h, lambda s, now: s.end_txn(EndTxnRequest("tx", 0, 32766, True), now))
    # The Prepare record reaches Short.MAX_VALUE and names the next producer id; the
    # markers are written with the old id at that epoch.
    assert records == [transaction_log_record("tx", TransactionLogValue(
        0, -1, 1, 32767, 32766, 60000, S.PREPARE_COMMIT.id, (TransactionLogPartitions("orders", (0,)),), 50, 0, 2))]
    assert h.read(lambda s: s.pending_markers()) == [TxnMarkers("tx", 0, 32767, True, (T0,), 2)]
    finish_markers(h)
    assert pending.result() == EndTxnResponse(producer_id=1, producer_epoch=0)
    t = txn(h)
    assert (t.producer_id, t.previous_producer_id, t.producer_epoch, t.last_producer_epoch, t.next_producer_id) == (
        1, 0, 0, 32766, -1)
    # A retry that never saw the rotation names the old id at the last epoch.
    assert end(h, "tx", 0, 32766).result() == EndTxnResponse(producer_id=1, producer_epoch=0)
    raises(Errors.INVALID_PRODUCER_ID_MAPPING, lambda: end(h, "tx", 0, 5).result())
    add(h, "tx", 1, 0, [T0])
    assert txn(h).state is S.ONGOING
    before = state_of(h)
    h.reload()
    assert state_of(h) == before


def test_end_txn_errors(tmp_path):
    h = harness(tmp_path)
    raises(Errors.INVALID_PRODUCER_ID_MAPPING, lambda: end(h, "tx", 0, 0).result())
    init(h)
    raises(Errors.INVALID_TXN_STATE, lambda: end(h, "tx", 0, 0).result())  # Empty: nothing to commit
    add(h, "tx", 0, 0, [T0])
    before = state_of(h)
    raises(Errors.INVALID_PRODUCER_ID_MAPPING, lambda: end(h, "tx", 5, 0).result())
    raises(Errors.PRODUCER_FENCED, lambda: end(h, "tx", 0, 1).result())
    raises(Errors.INVALID_REQUEST, lambda: end(h, "", 0, 0).result())
    raises(Errors.INVALID_TXN_STATE, lambda: h.call(lambda s, now: s.complete_markers("tx", 0, 0, now)))
    assert state_of(h) == before


@pytest.mark.parametrize("commit", [True, False])
def test_a_restarted_coordinator_finishes_the_markers(tmp_path, commit):
    h = harness(tmp_path)
    init(h)
    add(h, "tx", 0, 0, [T0, T1])
    pending = end(h, "tx", 0, 0, commit=commit)
    before = state_of(h)
    h.reload()
    assert pending.done and pending.error.error is Errors.NOT_COORDINATOR  # the client retries
    assert state_of(h) == before
    assert h.read(lambda s: s.pending_markers()) == [TxnMarkers("tx", 0, 1, commit, (T0, T1), 2)]
    finish_markers(h)
    assert txn(h).state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    # The client's retry names the epoch it had and learns the bumped one.
    assert end(h, "tx", 0, 0, commit=commit).result() == EndTxnResponse(producer_id=0, producer_epoch=1)
    after = state_of(h)
    h.reload()
    assert state_of(h) == after and h.read(lambda s: s.pending_markers()) == []


def test_markers_become_one_write_txn_markers_request_per_partition():
    markers = TxnMarkers("tx", 4, 2, True, (T0, ("__consumer_offsets", 27)))
    assert markers.requests_by_partition() == {
        T0: WriteTxnMarkersRequest((WritableTxnMarker(4, 2, True, (WritableTxnMarkerTopic("orders", (0,)),)),)),
        ("__consumer_offsets", 27): WriteTxnMarkersRequest((WritableTxnMarker(
            4, 2, True, (WritableTxnMarkerTopic("__consumer_offsets", (27,)),)),)),
    }
