"""The producer's side of idempotence and transactions (Kafka's TransactionManager).

It owns the producer id and epoch, the partitions added to the current transaction and the
client's transaction state. The states and their legal moves are one table, checked by
`_transition`. The user's thread calls `init_transactions`, `begin_transaction` and the end
of a transaction; the sender thread calls `producer_id_and_epoch`, `add_partitions` and
`batch_failed`. One lock guards the state; no Ray call is made while it is held.

It speaks transaction version 2 (KIP-890 part 2) when the cluster's `transaction.version`
is 2, as Kafka's producer does when the brokers' finalized feature says so: EndTxn bumps the
epoch and answers with the producer id and epoch to go on with, so every transaction starts
its sequences again at 0. Unlike Kafka's version 2 producer, it still adds each partition to
the transaction itself (see the README).
"""
from __future__ import annotations

import enum
import threading
import time
from typing import Any

from runtime.errors import Errors, KafkaError
from runtime.hashing import partition_for
from runtime.messages.txn import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnTopic,
                                  AddPartitionsToTxnTransaction, EndTxnRequest, InitProducerIdRequest,
                                  TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic)
from runtime.txn.coordinator import OFFSETS_TOPIC

from . import naming
from .errors import RETRIABLE_COORDINATOR_ERRORS

__all__ = ["TransactionManager", "TxnState"]

_RETRY_ON = RETRIABLE_COORDINATOR_ERRORS | {Errors.CONCURRENT_TRANSACTIONS}
# Errors after which this producer can do nothing more with its transactional id.
_FATAL = frozenset({Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH, Errors.INVALID_PRODUCER_ID_MAPPING,
                    Errors.TRANSACTION_COORDINATOR_FENCED})


class TxnState(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING = "CommittingTransaction"
    ABORTING = "AbortingTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


S = TxnState
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset(),
    S.READY: frozenset({S.UNINITIALIZED, S.COMMITTING, S.ABORTING}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    # A commit or abort that timed out may be called again.
    S.COMMITTING: frozenset({S.IN_TRANSACTION, S.COMMITTING}),
    S.ABORTING: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.ABORTING}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING, S.ABORTABLE_ERROR}),
    S.FATAL_ERROR: frozenset(TxnState),
}
del S


class TransactionManager:
    def __init__(self, cluster, client_id: str, transactional_id: str | None, transaction_timeout_ms: int,
                 max_block_ms: int) -> None:
        self._cluster = cluster
        self._client_id = client_id
        self.transactional_id = transactional_id
        self._timeout_ms = transaction_timeout_ms
        self._max_block_s = max_block_ms / 1000
        self.transaction_version = 2 if int(cluster.config.get("transaction.version", 2)) >= 2 else 1
        self._lock = threading.Lock()
        self.state = TxnState.UNINITIALIZED
        self._error: KafkaError | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self._partitions: set[tuple[str, int]] = set()  # added to the current transaction
        # A sent batch failed for good, so the partition may have a gap in its sequences: the
        # next producer id (idempotent) or epoch (transactional) starts them again.
        self._reset_needed = False
        self.sequences_for: tuple[int, int] | None = None  # the (id, epoch) the producer's sequences count for

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
        if self.state not in VALID_PREVIOUS_STATES[to]:
            raise KafkaError(Errors.INVALID_TXN_STATE, f"cannot move from {self.state.value} to {to.value}")
        self.state = to
        if error is not None:
            self._error = error

    def _raise_if_failed(self) -> None:
        if self.state in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
            raise self._error

    # ------------------------------------------------------------------ coordinator calls

    def _coordinator_call(self, method: str, request: Any, group_id: str | None = None) -> Any:
        """Call the transaction coordinator (or the group's coordinator), retrying while it
        moves, loads or finishes the previous transaction."""
        if group_id is None:
            key = self.transactional_id if self.transactional else self._client_id
            name = naming.transaction_coordinator(
                partition_for(key, int(self._cluster.config["transaction.state.log.num.partitions"])))
        else:
            name = naming.group_coordinator(
                partition_for(group_id, int(self._cluster.config["offsets.topic.num.partitions"])))
        return self._cluster.directory.call(name, method, request, timeout_s=self._max_block_s, retry_on=_RETRY_ON)

    def _fail_transaction(self, error: KafkaError) -> None:
        with self._lock:
            self._transition(TxnState.FATAL_ERROR if error.error in _FATAL else TxnState.ABORTABLE_ERROR, error)

    def _init_producer_id(self, current: tuple[int, int] | None) -> None:
        producer_id, epoch = current or (-1, -1)
        response = self._coordinator_call("init_producer_id", InitProducerIdRequest(
            self.transactional_id, self._timeout_ms, producer_id, epoch))
        if response.error_code:
            raise KafkaError(Errors.for_code(response.error_code), "InitProducerId failed")
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch

    # ------------------------------------------------------------------ the user's thread

    def init_transactions(self) -> None:
        with self._lock:
            self._raise_if_failed()
            if self.state is not TxnState.UNINITIALIZED:
                raise KafkaError(Errors.INVALID_TXN_STATE, "init_transactions was called already")
        try:
            self._init_producer_id(None)
        except KafkaError as e:
            if e.error in _FATAL:
                with self._lock:
                    self._transition(TxnState.FATAL_ERROR, e)
            raise
        with self._lock:
            self._transition(TxnState.READY)

    def begin_transaction(self) -> None:
        with self._lock:
            self._raise_if_failed()
            self._transition(TxnState.IN_TRANSACTION)
            self._partitions = set()

    def send_offsets_to_transaction(self, offsets: dict, group_metadata) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator: the offsets are
        committed with the transaction. ``offsets`` maps (topic, partition) to an offset or
        an OffsetAndMetadata; ``group_metadata`` is a group id or has ``group_id`` (and
        ``generation_id``, ``member_id``, ``group_instance_id`` to be checked as a member's)."""
        group_id = group_metadata if isinstance(group_metadata, str) else group_metadata.group_id
        with self._lock:
            self._raise_if_failed()
            if self.state is not TxnState.IN_TRANSACTION:
                raise KafkaError(Errors.INVALID_TXN_STATE, f"cannot send offsets in state {self.state.value}")
        by_topic: dict[str, list] = {}
        for (topic, partition), o in sorted(offsets.items()):
            offset, metadata, epoch = (o, "", -1) if isinstance(o, int) else (o.offset, o.metadata, o.leader_epoch)
            by_topic.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(partition, offset, epoch, metadata))
        try:
            response = self._coordinator_call("add_offsets_to_txn", AddOffsetsToTxnRequest(
                self.transactional_id, self.producer_id, self.producer_epoch, group_id))
            if response.error_code:
                raise KafkaError(Errors.for_code(response.error_code), "AddOffsetsToTxn failed")
            with self._lock:
                self._partitions.add((OFFSETS_TOPIC, partition_for(
                    group_id, int(self._cluster.config["offsets.topic.num.partitions"]))))
            response = self._coordinator_call("txn_offset_commit", TxnOffsetCommitRequest(
                self.transactional_id, group_id, self.producer_id, self.producer_epoch,
                getattr(group_metadata, "generation_id", -1), getattr(group_metadata, "member_id", ""),
                getattr(group_metadata, "group_instance_id", None),
                tuple(TxnOffsetCommitRequestTopic(t, tuple(ps)) for t, ps in by_topic.items())), group_id=group_id)
            code = next((p.error_code for t in response.topics for p in t.partitions if p.error_code), 0)
            if code:
                raise KafkaError(Errors.for_code(code), "TxnOffsetCommit failed")
        except KafkaError as e:
            self._fail_transaction(e)
            raise

    def raise_if_cannot_send(self) -> None:
        if not self.transactional:
            return
        with self._lock:
            self._raise_if_failed()
            if self.state is not TxnState.IN_TRANSACTION:
                raise KafkaError(Errors.INVALID_TXN_STATE, f"cannot send in state {self.state.value}: "
                                 "call begin_transaction() first")

    def begin_completion(self, commit: bool) -> None:
        """Stop sends; the producer flushes next, then calls `end_transaction`."""
        with self._lock:
            if commit or self.state is TxnState.FATAL_ERROR:
                self._raise_if_failed()
            self._transition(TxnState.COMMITTING if commit else TxnState.ABORTING)

    def end_transaction(self, commit: bool) -> None:
        """EndTxn once every batch of the transaction is acknowledged or failed."""
        with self._lock:
            self._raise_if_failed()  # a batch failed while flushing: the transaction must abort
            partitions = bool(self._partitions)
            reset = self._reset_needed
        bumped = False
        try:
            if partitions:  # nothing was added: the coordinator has no transaction to end
                response = self._coordinator_call("end_txn", EndTxnRequest(
                    self.transactional_id, self.producer_id, self.producer_epoch, commit, self.transaction_version))
                if response.error_code:
                    raise KafkaError(Errors.for_code(response.error_code), "EndTxn failed")
                if self.transaction_version >= 2:
                    # The end bumped the epoch (or moved to a new producer id): sequences
                    # start again, so a gap left by the aborted transaction is gone too.
                    with self._lock:
                        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
                    bumped = True
            if reset and not commit and not bumped:
                # The aborted transaction left a gap in some partition's sequences.
                self._init_producer_id((self.producer_id, self.producer_epoch))
                bumped = True
        except KafkaError as e:
            if e.error in _FATAL:
                with self._lock:
                    self._transition(TxnState.FATAL_ERROR, e)
            raise  # otherwise the same call may be made again
        with self._lock:
            if bumped:
                self._reset_needed = False
            self._partitions = set()
            self._transition(TxnState.READY)

    # ------------------------------------------------------------------ the sender thread

    def producer_id_and_epoch(self, busy: bool) -> tuple[int, int]:
        """The id and epoch for batches sent now. An idempotent producer gets its id at the
        first send, and a new one after a lost batch once nothing numbered is in the air."""
        if self.transactional:
            with self._lock:
                if self.state is TxnState.FATAL_ERROR:
                    raise self._error
                return self.producer_id, self.producer_epoch
        if self.producer_id < 0 or (self._reset_needed and not busy):
            self._init_producer_id(None)
            self._reset_needed = False
        return self.producer_id, self.producer_epoch

    def add_partitions(self, partitions: set[tuple[str, int]]) -> None:
        """AddPartitionsToTxn for the partitions the transaction writes to for the first time."""
        if not self.transactional:
            return
        with self._lock:
            self._raise_if_failed()
            new = sorted(partitions - self._partitions)
        if not new:
            return
        by_topic: dict[str, list[int]] = {}
        for topic, partition in new:
            by_topic.setdefault(topic, []).append(partition)
        request = AddPartitionsToTxnRequest((AddPartitionsToTxnTransaction(
            self.transactional_id, self.producer_id, self.producer_epoch, False,
            tuple(AddPartitionsToTxnTopic(t, tuple(ps)) for t, ps in by_topic.items())),))
        deadline = time.monotonic() + self._max_block_s
        while True:
            try:
                response = self._coordinator_call("add_partitions_to_txn", request)
                codes = [p.partition_error_code for r in response.results_by_transaction
                         for t in r.topic_results for p in t.results_by_partition]
                code = response.error_code or next((c for c in codes if c), 0)
                error = Errors.for_code(code)
                if error is Errors.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline:
                    time.sleep(0.02)  # the previous transaction is still writing its markers
                    continue
                if code:
                    raise KafkaError(error, "AddPartitionsToTxn failed")
                break
            except KafkaError as e:
                self._fail_transaction(e)
                raise
        with self._lock:
            self._partitions.update(new)

    def batch_failed(self, error: KafkaError, sent: bool) -> None:
        with self._lock:
            if sent:
                self._reset_needed = True
            if not self.transactional or self.state is TxnState.FATAL_ERROR:
                return
            if error.error in _FATAL:
                self._transition(TxnState.FATAL_ERROR, KafkaError(Errors.PRODUCER_FENCED, error.message))
            elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
                self._transition(TxnState.ABORTABLE_ERROR, error)
