"""The producer's transaction manager without Ray, from Kafka's TransactionManager: its state
table, the request each step sends and what each answer (or error) does to the state, the
epoch bumps (EndTxn under version 2; InitProducerId with the current id and epoch after an
abort under version 1; the idempotent producer's own bump), and a whole transaction run
against the real transaction coordinator shard."""
from __future__ import annotations

import pytest

from runtime.clients.transaction_manager import (MAX_EPOCH, PREVIOUS_STATES, TransactionManager, TxnState as S)
from runtime.errors import Errors, KafkaError
from runtime.messages.txn import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnPartitionResult,
                                  AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, AddPartitionsToTxnResult,
                                  AddPartitionsToTxnTopicResult, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
                                  InitProducerIdResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
                                  TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic)
from runtime.txn.coordinator import OFFSETS_TOPIC

from ..txn.helpers import finish_markers, harness

TID = "tx"
T0, T1 = ("t", 0), ("t", 1)


def manager(version: int = 2) -> TransactionManager:
    return TransactionManager(TID, transaction_timeout_ms=1000, transaction_version=version,
                              offsets_partition_for=lambda group_id: 7)


def ready(version: int = 2, pid: int = 5, epoch: int = 0) -> TransactionManager:
    m = manager(version)
    m.init_transactions()
    m.handle_init_producer_id(InitProducerIdResponse(0, pid, epoch))
    return m


def in_transaction(version: int = 2, partitions=(T0,)) -> TransactionManager:
    m = ready(version)
    m.begin_transaction()
    request = m.add_partitions_request(set(partitions))
    m.handle_add_partitions(request, added(request))
    return m


def added(request: AddPartitionsToTxnRequest, code: int = 0) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(0, tuple(AddPartitionsToTxnResult(t.transactional_id, tuple(
        AddPartitionsToTxnTopicResult(topic.name, tuple(AddPartitionsToTxnPartitionResult(p, code)
                                                         for p in topic.partitions))
        for topic in t.topics)) for t in request.transactions))


def raises(error: Errors, fn, *args):
    with pytest.raises(KafkaError) as e:
        fn(*args)
    assert e.value.error is error
    return e.value


# ---------------------------------------------------------------------- the table


def test_the_state_table_is_kafkas():
    assert PREVIOUS_STATES == {
        S.UNINITIALIZED: {S.READY, S.ABORTABLE_ERROR},
        S.INITIALIZING: {S.UNINITIALIZED, S.ABORTING_TRANSACTION},
        S.READY: {S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION},
        S.IN_TRANSACTION: {S.READY},
        S.COMMITTING_TRANSACTION: {S.IN_TRANSACTION},
        S.ABORTING_TRANSACTION: {S.IN_TRANSACTION, S.ABORTABLE_ERROR},
        S.ABORTABLE_ERROR: {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING},
        S.FATAL_ERROR: set(S),
    }


@pytest.mark.parametrize("step", ["begin_transaction", "begin_commit", "begin_abort", "raise_if_cannot_send"])
def test_an_illegal_step_raises_and_changes_nothing(step):
    m = manager()  # UNINITIALIZED: no transaction may start, end or send
    raises(Errors.INVALID_TXN_STATE, getattr(m, step))
    assert (m.state, m.producer_id, m.last_error) == (S.UNINITIALIZED, -1, None)


def test_init_transactions_twice_is_refused():
    m = ready()
    raises(Errors.INVALID_TXN_STATE, m.init_transactions)
    assert m.state is S.READY


# ---------------------------------------------------------------------- InitProducerId


def test_init_transactions_sends_init_producer_id_and_becomes_ready():
    m = manager()
    assert m.init_transactions() == InitProducerIdRequest(TID, 1000, -1, -1)
    assert m.state is S.INITIALIZING
    m.handle_init_producer_id(InitProducerIdResponse(0, 5, 3))
    assert (m.state, m.producer_id, m.producer_epoch) == (S.READY, 5, 3)


def test_an_init_that_timed_out_may_be_called_again():
    m = manager()
    m.init_transactions()
    m.request_failed(KafkaError(Errors.REQUEST_TIMED_OUT, "no answer"))
    assert m.state is S.INITIALIZING
    assert m.init_transactions() == InitProducerIdRequest(TID, 1000, -1, -1)


@pytest.mark.parametrize("e", [Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH])
def test_a_fenced_init_is_fatal(e):
    m = manager()
    m.init_transactions()
    raises(e, m.handle_init_producer_id, InitProducerIdResponse(e.code))
    assert m.state is S.FATAL_ERROR
    raises(e, m.begin_transaction)  # every later step fails with it


# ---------------------------------------------------------------------- in the transaction


def test_only_new_partitions_are_added():
    m = ready()
    m.begin_transaction()
    request = m.add_partitions_request({T1, T0})
    assert [(t.name, t.partitions) for t in request.transactions[0].topics] == [("t", (0, 1))]
    assert (request.transactions[0].producer_id, request.transactions[0].producer_epoch) == (5, 0)
    assert m.add_partitions_request({T0}) is not None  # not added until the answer
    assert m.handle_add_partitions(request, added(request)) is False
    assert m.add_partitions_request({T0, T1}) is None
    assert m.partitions == {T0, T1}


def test_concurrent_transactions_means_send_the_add_again():
    m = ready()
    m.begin_transaction()
    request = m.add_partitions_request({T0})
    assert m.handle_add_partitions(request, added(request, Errors.CONCURRENT_TRANSACTIONS.code)) is True
    assert m.state is S.IN_TRANSACTION and m.partitions == set()


@pytest.mark.parametrize("e, state", [
    (Errors.PRODUCER_FENCED, S.FATAL_ERROR),
    (Errors.INVALID_PRODUCER_EPOCH, S.FATAL_ERROR),
    (Errors.INVALID_PRODUCER_ID_MAPPING, S.FATAL_ERROR),
    (Errors.TRANSACTION_COORDINATOR_FENCED, S.FATAL_ERROR),
    (Errors.INVALID_TXN_STATE, S.FATAL_ERROR),
    (Errors.TRANSACTION_ABORTABLE, S.ABORTABLE_ERROR),
    (Errors.UNKNOWN_TOPIC_OR_PARTITION, S.ABORTABLE_ERROR),
    (Errors.ILLEGAL_GENERATION, S.ABORTABLE_ERROR),
])
def test_each_transactional_error_and_its_state(e, state):
    # The same error does the same to the state whichever request of the transaction got it.
    for fail in (_fail_add_partitions, _fail_add_offsets, _fail_txn_offset_commit):
        m = in_transaction()
        fail(m, e)
        assert (m.state, m.last_error.error) == (state, e), fail.__name__
        raises(m.last_error.error, m.begin_commit)
        raises(m.last_error.error, m.raise_if_cannot_send)
        if state is S.ABORTABLE_ERROR:
            m.begin_abort()
            assert m.state is S.ABORTING_TRANSACTION
        else:
            raises(m.last_error.error, m.begin_abort)


def _fail_add_partitions(m, e):
    request = m.add_partitions_request({T1})
    raises(e, m.handle_add_partitions, request, added(request, e.code))


def _fail_add_offsets(m, e):
    m.send_offsets_to_transaction("g")
    raises(e, m.handle_add_offsets, AddOffsetsToTxnResponse(e.code), {T0: 1}, "g")


def _fail_txn_offset_commit(m, e):
    m.send_offsets_to_transaction("g")
    m.handle_add_offsets(AddOffsetsToTxnResponse(), {T0: 1}, "g")
    raises(e, m.handle_txn_offset_commit, TxnOffsetCommitResponse((TxnOffsetCommitResponseTopic(
        "t", (TxnOffsetCommitResponsePartition(0, e.code),)),)))


@pytest.mark.parametrize("e, state", [
    (Errors.PRODUCER_FENCED, S.FATAL_ERROR),
    (Errors.INVALID_PRODUCER_EPOCH, S.FATAL_ERROR),
    # A leader's refusal of a batch outside the transaction is abortable (Kafka's Sender).
    (Errors.INVALID_TXN_STATE, S.ABORTABLE_ERROR),
    (Errors.TRANSACTION_ABORTABLE, S.ABORTABLE_ERROR),
    (Errors.MESSAGE_TOO_LARGE, S.ABORTABLE_ERROR),
])
def test_a_failed_batch_and_its_state(e, state):
    m = in_transaction()
    m.batch_failed(KafkaError(e, "refused"), sent=True)
    # A fenced batch fails the producer as PRODUCER_FENCED, whichever code fenced it.
    assert (m.state, m.last_error.error) == (state, Errors.PRODUCER_FENCED if state is S.FATAL_ERROR else e)
    assert m.epoch_bump_required


def test_end_txn_errors():
    m = in_transaction()
    m.begin_commit()
    raises(Errors.TRANSACTION_ABORTABLE, m.handle_end, EndTxnResponse(Errors.TRANSACTION_ABORTABLE.code))
    assert m.state is S.ABORTABLE_ERROR
    m = in_transaction()
    m.begin_commit()
    raises(Errors.INVALID_TXN_STATE, m.handle_end, EndTxnResponse(Errors.INVALID_TXN_STATE.code))
    assert m.state is S.FATAL_ERROR


def test_a_call_that_got_no_answer_fails_the_open_transaction():
    m = in_transaction()
    m.transaction_request_failed(KafkaError(Errors.REQUEST_TIMED_OUT, "no answer within max_block_ms"))
    assert m.state is S.ABORTABLE_ERROR


def test_offsets_go_with_the_transaction():
    m = in_transaction()
    assert m.send_offsets_to_transaction("g") == AddOffsetsToTxnRequest(TID, 5, 0, "g")
    commit = m.handle_add_offsets(AddOffsetsToTxnResponse(), {T1: 9, T0: 4}, "g")
    assert isinstance(commit, TxnOffsetCommitRequest) and commit.group_id == "g"
    assert [(p.partition_index, p.committed_offset) for p in commit.topics[0].partitions] == [(0, 4), (1, 9)]
    assert (OFFSETS_TOPIC, 7) in m.partitions


def test_offsets_outside_a_transaction_are_refused():
    m = ready()
    raises(Errors.INVALID_TXN_STATE, m.send_offsets_to_transaction, "g")


# ---------------------------------------------------------------------- the end


def test_a_version_2_commit_takes_the_bumped_epoch_from_end_txn():
    m = in_transaction(version=2)
    m.begin_commit()
    assert m.state is S.COMMITTING_TRANSACTION
    raises(Errors.INVALID_TXN_STATE, m.raise_if_cannot_send)
    assert m.end_txn_request() == EndTxnRequest(TID, 5, 0, True, 2)
    assert m.handle_end(EndTxnResponse(0, 5, 1)) is True
    assert (m.state, m.producer_epoch, m.partitions) == (S.READY, 1, set())


def test_a_version_1_commit_keeps_the_epoch():
    m = in_transaction(version=1)
    m.begin_commit()
    assert m.end_txn_request() == EndTxnRequest(TID, 5, 0, True, 1)
    assert m.handle_end(EndTxnResponse()) is True
    assert (m.state, m.producer_epoch) == (S.READY, 0)


def test_a_commit_that_failed_may_be_called_again_and_a_fenced_one_is_fatal():
    m = in_transaction()
    m.begin_commit()
    raises(Errors.REQUEST_TIMED_OUT, m.handle_end, EndTxnResponse(Errors.REQUEST_TIMED_OUT.code))
    assert m.state is S.COMMITTING_TRANSACTION
    m.begin_commit()
    raises(Errors.PRODUCER_FENCED, m.handle_end, EndTxnResponse(Errors.PRODUCER_FENCED.code))
    assert m.state is S.FATAL_ERROR


def test_a_transaction_that_added_nothing_ends_without_a_request():
    m = ready()
    m.begin_transaction()
    m.begin_commit()
    assert m.end_txn_request() is None
    assert m.handle_end(None) is True and m.state is S.READY


def test_a_commit_after_a_failed_batch_raises_and_the_abort_goes_on():
    m = in_transaction(version=2)
    m.begin_commit()
    m.batch_failed(KafkaError(Errors.REQUEST_TIMED_OUT, "delivery timeout"), sent=True)
    assert m.state is S.ABORTABLE_ERROR
    raises(Errors.REQUEST_TIMED_OUT, m.end_txn_request)
    m.begin_abort()
    assert m.end_txn_request() == EndTxnRequest(TID, 5, 0, False, 2)
    assert m.handle_end(EndTxnResponse(0, 5, 1)) is True  # version 2: EndTxn was the bump
    assert (m.state, m.producer_epoch, m.epoch_bump_required) == (S.READY, 1, False)


def test_a_version_1_abort_after_an_error_bumps_the_epoch_with_init_producer_id():
    m = in_transaction(version=1)
    m.batch_failed(KafkaError(Errors.REQUEST_TIMED_OUT, "delivery timeout"), sent=True)
    m.begin_abort()
    assert m.end_txn_request() == EndTxnRequest(TID, 5, 0, False, 1)
    assert m.handle_end(EndTxnResponse()) is False and m.state is S.INITIALIZING
    assert m.end_txn_request() == InitProducerIdRequest(TID, 1000, 5, 0)
    assert m.handle_end(InitProducerIdResponse(0, 5, 1)) is True
    assert (m.state, m.producer_epoch) == (S.READY, 1)


def test_a_failed_bump_after_an_abort_leaves_the_abort_to_be_called_again():
    m = in_transaction(version=1)
    m.batch_failed(KafkaError(Errors.REQUEST_TIMED_OUT, "delivery timeout"), sent=True)
    m.begin_abort()
    m.end_txn_request()
    m.handle_end(EndTxnResponse())
    m.end_txn_request()
    m.request_failed(KafkaError(Errors.REQUEST_TIMED_OUT, "no answer"))
    assert m.state is S.ABORTABLE_ERROR
    m.begin_abort()
    assert m.end_txn_request() == InitProducerIdRequest(TID, 1000, 5, 0)  # the EndTxn is done
    assert m.handle_end(InitProducerIdResponse(0, 5, 1)) is True and m.state is S.READY


def test_a_version_1_abort_without_an_error_keeps_the_epoch():
    m = in_transaction(version=1)
    m.begin_abort()
    m.end_txn_request()
    assert m.handle_end(EndTxnResponse()) is True
    assert (m.state, m.producer_epoch) == (S.READY, 0)


# ---------------------------------------------------------------------- idempotent, no transaction


def test_an_idempotent_producer_gets_its_id_at_the_first_send():
    m = TransactionManager()
    assert m.producer_id_request(busy=False) == InitProducerIdRequest(None, 60000, -1, -1)
    assert m.state is S.INITIALIZING
    m.handle_init_producer_id(InitProducerIdResponse(0, 9, 0))
    assert m.producer_id_request(busy=False) is None and m.state is S.READY
    m.raise_if_cannot_send()  # no transaction needed to send


def test_an_idempotent_producer_bumps_its_own_epoch_after_a_lost_batch_once_nothing_is_in_the_air():
    m = TransactionManager()
    m.producer_id_request(busy=False)
    m.handle_init_producer_id(InitProducerIdResponse(0, 9, 0))
    m.batch_failed(KafkaError(Errors.REQUEST_TIMED_OUT, "delivery timeout"), sent=True)
    assert m.producer_id_request(busy=True) is None and m.producer_epoch == 0  # waits
    assert m.producer_id_request(busy=False) is None
    assert (m.producer_id, m.producer_epoch, m.epoch_bump_required) == (9, 1, False)


def test_an_unsent_failed_batch_needs_no_bump():
    m = TransactionManager()
    m.producer_id_request(busy=False)
    m.handle_init_producer_id(InitProducerIdResponse(0, 9, 0))
    m.batch_failed(KafkaError(Errors.REQUEST_TIMED_OUT, "no producer id"), sent=False)
    m.producer_id_request(busy=False)
    assert m.producer_epoch == 0


def test_at_the_last_epoch_an_idempotent_producer_asks_for_a_new_id():
    m = TransactionManager()
    m.producer_id_request(busy=False)
    m.handle_init_producer_id(InitProducerIdResponse(0, 9, MAX_EPOCH))
    m.batch_failed(KafkaError(Errors.REQUEST_TIMED_OUT, "delivery timeout"), sent=True)
    assert m.producer_id_request(busy=False) == InitProducerIdRequest(None, 60000, -1, -1)
    m.handle_init_producer_id(InitProducerIdResponse(0, 10, 0))
    assert (m.producer_id, m.producer_epoch, m.state) == (10, 0, S.READY)


# ---------------------------------------------------------------------- against the coordinator


def coordinator(h, request):
    """What the shell does: carry the request to the transaction coordinator shard and
    the answer (or its error code) back."""
    try:
        if isinstance(request, InitProducerIdRequest):
            return h.call(lambda s, now: s.init_producer_id(request, now))
        if isinstance(request, AddPartitionsToTxnRequest):
            return h.call(lambda s, now: s.add_partitions_to_txn(request, now))
        if isinstance(request, EndTxnRequest):
            pending = h.write(lambda s, now: s.end_txn(request, now))
            finish_markers(h)
            return pending.result()
    except KafkaError as e:
        kind = {InitProducerIdRequest: InitProducerIdResponse, EndTxnRequest: EndTxnResponse}[type(request)]
        return kind(e.error.code)
    raise AssertionError(request)


@pytest.mark.parametrize("version", [1, 2])
def test_transactions_against_the_coordinator_shard(tmp_path, version):
    h = harness(tmp_path)
    m = manager(version)
    m.handle_init_producer_id(coordinator(h, m.init_transactions()))
    epoch = m.producer_epoch
    for commit in (True, False):
        m.begin_transaction()
        request = m.add_partitions_request({T0, T1})
        assert m.handle_add_partitions(request, coordinator(h, request)) is False
        m.begin_commit() if commit else m.begin_abort()
        while not m.handle_end(coordinator(h, m.end_txn_request())):
            pass
        assert m.state is S.READY
        epoch += version >= 2
        assert m.producer_epoch == epoch
    # A second producer with the same id fences this one.
    rival = manager(version)
    rival.handle_init_producer_id(coordinator(h, rival.init_transactions()))
    m.begin_transaction()
    request = m.add_partitions_request({T0})
    raises(Errors.PRODUCER_FENCED, m.handle_add_partitions, request, coordinator(h, request))
    assert m.state is S.FATAL_ERROR
