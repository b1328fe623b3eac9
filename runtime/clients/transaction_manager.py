"""The producer's side of idempotence and transactions (Kafka's TransactionManager), sans I/O.

It owns the producer id and epoch, the partitions added to the current transaction and the
client's transaction state, and decides when the id or epoch changes. Each operation returns
the request to send (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit,
EndTxn) and a `handle_...` method takes its response; the caller does the calls (and retries
the coordinator errors Kafka's clients retry). Every state change goes through
`_transition`, checked against `PREVIOUS_STATES`, Kafka's table.

Transactions version 2 (KIP-890 part 2): EndTxn bumps the epoch and answers with the
producer id and epoch to go on with, so every transaction starts its sequences at 0. Unlike
Kafka's version 2 producer, it still adds each partition to the transaction itself (see the
README).

When an epoch bump is needed (Kafka's epochBumpRequired): an idempotent producer whose sent
batch failed for good bumps its own epoch once nothing numbered is in the air (a new id at
the last epoch); a transactional one that hit an abortable error bumps it when the abort
ends: version 2 through EndTxn, version 1 with an InitProducerId carrying the current id
and epoch.
"""
from __future__ import annotations

import enum
from typing import Any

from runtime.errors import Errors, KafkaError
from runtime.messages.txn import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
                                  AddPartitionsToTxnResponse, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
                                  EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse,
                                  TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
                                  TxnOffsetCommitResponse)
from runtime.txn.coordinator import OFFSETS_TOPIC

__all__ = ["TxnState", "PREVIOUS_STATES", "FATAL_ERRORS", "MAX_EPOCH", "TransactionManager"]

# Errors after which this producer can do nothing more with its transactional id.
FATAL_ERRORS = frozenset({Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH, Errors.INVALID_PRODUCER_ID_MAPPING,
                          Errors.TRANSACTION_COORDINATOR_FENCED})
# A coordinator's answer that ends the producer too (Kafka's handlers: the transaction is not
# where the producer believes it is).
_FATAL_ANSWERS = FATAL_ERRORS | {Errors.INVALID_TXN_STATE}
MAX_EPOCH = 32767  # Short.MAX_VALUE: past it a producer needs a new id


class TxnState(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING_TRANSACTION = "CommittingTransaction"
    ABORTING_TRANSACTION = "AbortingTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


S = TxnState
# Kafka's TransactionManager.State.isTransitionValid: each state and the states it may be
# entered from. A fatal error may come from anywhere and leads nowhere.
PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.READY, S.ABORTABLE_ERROR}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}),
    S.FATAL_ERROR: frozenset(TxnState),
}
del S


class TransactionManager:
    def __init__(self, transactional_id: str | None = None, *, transaction_timeout_ms: int = 60000,
                 transaction_version: int = 2, offsets_partition_for=None) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.transaction_version = 2 if transaction_version >= 2 else 1
        self._offsets_partition_for = offsets_partition_for  # group id -> its __consumer_offsets partition
        self.state = TxnState.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.partitions: set[tuple[str, int]] = set()  # added to the current transaction
        self.epoch_bump_required = False
        self._bumping_after_abort = False  # INITIALIZING entered from ABORTING_TRANSACTION

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def starts_at_sequence_zero(self) -> bool:
        """Whether every leader takes only sequence 0 first from this producer's epoch: a
        version 2 transaction's first batch on a partition is verified, and then a producer
        new to the partition must start at 0 (Kafka's ProducerAppendInfo.checkSequence)."""
        return self.transactional and self.transaction_version >= 2

    def _transition(self, to: TxnState, error: KafkaError | None = None) -> None:
        if self.state not in PREVIOUS_STATES[to]:
            raise KafkaError(Errors.INVALID_TXN_STATE, f"cannot move from {self.state.value} to {to.value}")
        self.state = to
        if error is not None:
            self.last_error = error

    def _raise_if_failed(self) -> None:
        if self.state in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
            raise self.last_error

    def transaction_request_failed(self, error: KafkaError) -> None:
        """A request made for the open transaction (AddPartitionsToTxn, AddOffsetsToTxn,
        TxnOffsetCommit) failed for good: fatal, or the transaction must abort."""
        if self.state is not TxnState.FATAL_ERROR:
            self._fail(error)

    def _fail(self, error: KafkaError) -> None:
        if error.error in _FATAL_ANSWERS:
            self._transition(TxnState.FATAL_ERROR, error)
        else:
            if self.state is not TxnState.INITIALIZING:
                self.epoch_bump_required = True  # Kafka's maybeTransitionToErrorState
            self._transition(TxnState.ABORTABLE_ERROR, error)

    def request_failed(self, error: KafkaError) -> None:
        """A call failed (no answer within max_block_ms, or an error answer). A fatal error
        ends the producer; the epoch bump after an abort failing leaves the abort to be
        called again; otherwise the same call may be made again."""
        if error.error in _FATAL_ANSWERS:
            if self.state is not TxnState.FATAL_ERROR:
                self._transition(TxnState.FATAL_ERROR, error)
        elif error.error is Errors.TRANSACTION_ABORTABLE and self.state is TxnState.COMMITTING_TRANSACTION:
            self._fail(error)
        elif self.state is TxnState.INITIALIZING and self._bumping_after_abort:
            self._bumping_after_abort = False
            self._transition(TxnState.ABORTABLE_ERROR, error)

    # ------------------------------------------------------------------ InitProducerId

    def init_transactions(self) -> InitProducerIdRequest:
        """Register the transactional id. Called again after a timeout, it sends again."""
        self._raise_if_failed()
        if self.state is not TxnState.INITIALIZING:
            if self.state is not TxnState.UNINITIALIZED:
                raise KafkaError(Errors.INVALID_TXN_STATE, "init_transactions was called already")
            self._transition(TxnState.INITIALIZING)
        return self._init_producer_id_request(bump=False)

    def _init_producer_id_request(self, bump: bool) -> InitProducerIdRequest:
        producer_id, epoch = (self.producer_id, self.producer_epoch) if bump else (-1, -1)
        return InitProducerIdRequest(self.transactional_id, self.transaction_timeout_ms, producer_id, epoch)

    def handle_init_producer_id(self, response: InitProducerIdResponse) -> None:
        if response.error_code:
            error = KafkaError(Errors.for_code(response.error_code), "InitProducerId failed")
            self.request_failed(error)
            raise error
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        self.epoch_bump_required = self._bumping_after_abort = False
        self.partitions = set()
        self._transition(TxnState.READY)

    def producer_id_request(self, busy: bool) -> InitProducerIdRequest | None:
        """For the sender, before it numbers batches: the InitProducerId an idempotent
        producer needs first (None when it has an id). ``busy`` says numbered batches may
        still be in the air; an epoch bump waits until none is."""
        if self.transactional:
            if self.state is TxnState.FATAL_ERROR:
                raise self.last_error
            return None
        if self.epoch_bump_required and not busy:
            self.epoch_bump_required = False
            if self.producer_epoch < MAX_EPOCH:
                self.producer_epoch += 1  # the leaders take a higher epoch from sequence 0
            else:
                self.producer_id = self.producer_epoch = -1
                self._transition(TxnState.UNINITIALIZED)
        if self.producer_id >= 0:
            return None
        if self.state is not TxnState.INITIALIZING:
            self._transition(TxnState.INITIALIZING)
        return self._init_producer_id_request(bump=False)

    # ------------------------------------------------------------------ the transaction

    def begin_transaction(self) -> None:
        self._raise_if_failed()
        self._transition(TxnState.IN_TRANSACTION)
        self.partitions = set()

    def raise_if_cannot_send(self) -> None:
        if not self.transactional:
            return
        self._raise_if_failed()
        if self.state is not TxnState.IN_TRANSACTION:
            raise KafkaError(Errors.INVALID_TXN_STATE, f"cannot send in state {self.state.value}: "
                             "call begin_transaction() first")

    def add_partitions_request(self, partitions: set[tuple[str, int]]) -> AddPartitionsToTxnRequest | None:
        """AddPartitionsToTxn for the partitions the transaction writes to for the first time
        (None: nothing new, or not transactional)."""
        if not self.transactional:
            return None
        self._raise_if_failed()
        new = sorted(partitions - self.partitions)
        if not new:
            return None
        by_topic: dict[str, list[int]] = {}
        for topic, partition in new:
            by_topic.setdefault(topic, []).append(partition)
        return AddPartitionsToTxnRequest((AddPartitionsToTxnTransaction(
            self.transactional_id, self.producer_id, self.producer_epoch, False,
            tuple(AddPartitionsToTxnTopic(t, tuple(ps)) for t, ps in by_topic.items())),))

    def handle_add_partitions(self, request: AddPartitionsToTxnRequest, response: AddPartitionsToTxnResponse) -> bool:
        """True when the request should be sent again: the previous transaction is still
        writing its markers (CONCURRENT_TRANSACTIONS). Raises the error that failed it."""
        codes = [p.partition_error_code for r in response.results_by_transaction
                 for t in r.topic_results for p in t.results_by_partition]
        error = Errors.for_code(response.error_code or next((c for c in codes if c), 0))
        if error is Errors.CONCURRENT_TRANSACTIONS:
            return True
        if error is not Errors.NONE:
            failure = KafkaError(error, "AddPartitionsToTxn failed")
            self._fail(failure)
            raise failure
        self.partitions.update((t.name, p) for txn in request.transactions for t in txn.topics for p in t.partitions)
        return False

    def send_offsets_to_transaction(self, group_id: str) -> AddOffsetsToTxnRequest:
        """First step of committing a consumer's offsets with the transaction."""
        self._raise_if_failed()
        if self.state is not TxnState.IN_TRANSACTION:
            raise KafkaError(Errors.INVALID_TXN_STATE, f"cannot send offsets in state {self.state.value}")
        return AddOffsetsToTxnRequest(self.transactional_id, self.producer_id, self.producer_epoch, group_id)

    def handle_add_offsets(self, response: AddOffsetsToTxnResponse, offsets: dict,
                           group_metadata: Any) -> TxnOffsetCommitRequest:
        """Then the TxnOffsetCommit for the group's coordinator. ``offsets`` maps (topic,
        partition) to an offset or an OffsetAndMetadata; ``group_metadata`` is a group id or
        has ``group_id`` (and ``generation_id``, ``member_id``, ``group_instance_id``)."""
        group_id = _group_id(group_metadata)
        if response.error_code:
            failure = KafkaError(Errors.for_code(response.error_code), "AddOffsetsToTxn failed")
            self._fail(failure)
            raise failure
        self.partitions.add((OFFSETS_TOPIC, self._offsets_partition_for(group_id)))
        by_topic: dict[str, list] = {}
        for (topic, partition), o in sorted(offsets.items()):
            offset, metadata, epoch = (o, "", -1) if isinstance(o, int) else (o.offset, o.metadata, o.leader_epoch)
            by_topic.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(partition, offset, epoch, metadata))
        return TxnOffsetCommitRequest(
            self.transactional_id, group_id, self.producer_id, self.producer_epoch,
            getattr(group_metadata, "generation_id", -1), getattr(group_metadata, "member_id", ""),
            getattr(group_metadata, "group_instance_id", None),
            tuple(TxnOffsetCommitRequestTopic(t, tuple(ps)) for t, ps in by_topic.items()))

    def handle_txn_offset_commit(self, response: TxnOffsetCommitResponse) -> None:
        code = next((p.error_code for t in response.topics for p in t.partitions if p.error_code), 0)
        if code:
            failure = KafkaError(Errors.for_code(code), "TxnOffsetCommit failed")
            self._fail(failure)
            raise failure

    def batch_failed(self, error: KafkaError, sent: bool) -> None:
        """A batch failed for good. A sent one may have left a gap in its partition's
        sequences, which a new epoch closes."""
        if sent:
            self.epoch_bump_required = True
        if not self.transactional or self.state is TxnState.FATAL_ERROR:
            return
        if error.error in FATAL_ERRORS:
            self._transition(TxnState.FATAL_ERROR, KafkaError(Errors.PRODUCER_FENCED, error.message))
        elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
            self.epoch_bump_required = True
            self._transition(TxnState.ABORTABLE_ERROR, error)

    # ------------------------------------------------------------------ the end

    def begin_commit(self) -> None:
        """Stop sends; the caller flushes next, then sends `end_txn_request`. A commit
        that timed out may be called again (Kafka reuses its pending result)."""
        if self.state is TxnState.COMMITTING_TRANSACTION:
            return
        self._raise_if_failed()
        self._transition(TxnState.COMMITTING_TRANSACTION)

    def begin_abort(self) -> None:
        if self.state is TxnState.ABORTING_TRANSACTION:
            return
        if self.state is not TxnState.ABORTABLE_ERROR:
            self._raise_if_failed()
        self._transition(TxnState.ABORTING_TRANSACTION)

    def end_txn_request(self) -> EndTxnRequest | InitProducerIdRequest | None:
        """What ends the transaction once every batch is acknowledged or failed: EndTxn
        (none when no partition was added: the coordinator has no transaction), or, after
        an abort that needs it under version 1, the InitProducerId that bumps the epoch.
        None when there is nothing to send: call `handle_end` with None."""
        self._raise_if_failed()  # a batch failed while flushing: the transaction must abort
        commit = self.state is TxnState.COMMITTING_TRANSACTION
        if self.state is TxnState.INITIALIZING:
            return self._init_producer_id_request(bump=True)
        if self.partitions:
            return EndTxnRequest(self.transactional_id, self.producer_id, self.producer_epoch, commit,
                                 self.transaction_version)
        if self.epoch_bump_required and not commit:
            self._bump_after_abort()
            return self._init_producer_id_request(bump=True)
        return None

    def handle_end(self, response: EndTxnResponse | InitProducerIdResponse | None) -> bool:
        """Take the answer to `end_txn_request`. True when the transaction is over (READY);
        False when `end_txn_request` has one more request to send (the epoch bump)."""
        if isinstance(response, InitProducerIdResponse):
            self.handle_init_producer_id(response)
            return True
        if response is not None:
            if response.error_code:
                error = KafkaError(Errors.for_code(response.error_code), "EndTxn failed")
                self.request_failed(error)
                raise error  # not fatal: the same call may be made again
            if self.transaction_version >= 2:
                # The end bumped the epoch (or moved to a new producer id): sequences start
                # again, so a gap left by the aborted transaction is gone too.
                self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
                self.epoch_bump_required = False
        self.partitions = set()
        aborting = self.state is TxnState.ABORTING_TRANSACTION
        if aborting and self.epoch_bump_required:
            self._bump_after_abort()  # Kafka's completeTransaction
            return False
        self._transition(TxnState.READY)
        self.last_error = None
        return True

    def _bump_after_abort(self) -> None:
        self._transition(TxnState.INITIALIZING)
        self._bumping_after_abort = True


def _group_id(group_metadata: Any) -> str:
    return group_metadata if isinstance(group_metadata, str) else group_metadata.group_id
