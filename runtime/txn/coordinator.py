"""The transaction coordinator of one __transaction_state partition (Kafka's
TransactionCoordinator and TransactionStateManager, transaction protocol versions 1 and 2).

Write operations validate, then build TransactionLog records; `replay` is the only code that
changes the metadata. Ending a transaction is two-phase: `end_txn` persists PrepareCommit or
PrepareAbort and answers with a Deferred; the owner of the shard reads `pending_markers()`,
writes the markers to every partition in the transaction, then calls `markers_written`,
which releases the EndTxn response, and `complete_markers`, which persists CompleteCommit or
CompleteAbort. A shard loaded in a Prepare state lists the same markers again, so a restart
finishes the work.

Unlike Kafka, which answers EndTxn as soon as the Prepare record is durable, the response
waits for the markers: a caller whose commit_transaction() returned can read its records
with read_committed at once, which is what a Ray user would expect. It need not wait for
the Complete record as well: once every marker is durable the outcome is visible and fixed,
and a coordinator that loses the Complete record writes the same markers again.

The version of a client's EndTxn is the one its request names (Kafka: EndTxn v5 and later
is version 2), and the EndTxn answer of version 2 carries the producer id and epoch the
producer goes on with. A fencing abort (InitProducerId over an ongoing transaction, a
timeout) takes the cluster's `transaction.version`, as Kafka's does.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from ..codec import Record
from ..coordinator import CoordinatorContext, CoordinatorShard, Deferred, Result
from ..errors import Errors, KafkaError, raise_if
from ..hashing import partition_for
from ..messages.txn import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnPartitionResult,
                            AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, AddPartitionsToTxnResult,
                            AddPartitionsToTxnTopicResult, AddPartitionsToTxnTransaction,
                            DescribeTransactionsRequest, DescribeTransactionsResponse, DescribeTransactionsTopicData,
                            DescribeTransactionsTransactionState, EndTxnRequest, EndTxnResponse,
                            InitProducerIdRequest, InitProducerIdResponse, ListTransactionsRequest,
                            ListTransactionsResponse, ListTransactionsTransactionState, WritableTxnMarker,
                            WritableTxnMarkerTopic, WriteTxnMarkersRequest)
from ..topics.internal import OFFSETS_TOPIC
from .records import (ProducerIdBlockKey, TransactionLogKey, producer_id_block_record, transaction_log_record,
                      transaction_log_tombstone)
from .state import (MAX_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TV_2, TransactionMetadata, TransactionState,
                    is_epoch_exhausted)

__all__ = ["TransactionCoordinatorShard", "TxnMarkers", "PRODUCER_ID_BLOCK_SIZE", "OFFSETS_TOPIC"]

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
MAX_RETRY_EPOCH = MAX_EPOCH - 1  # the last epoch a client sees before its producer id rotates

DEFAULTS = {
    "transaction.max.timeout.ms": 900000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "transactional.id.expiration.ms": 604800000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000,
    "transaction.state.log.num.partitions": 50,
    "offsets.topic.num.partitions": 50,
    "transaction.version": 2,  # the cluster feature: 2 (KIP-890 part 2) unless set back to 1
}

ABORT_TIMED_OUT_KEY = "transaction-abort"
EXPIRE_IDS_KEY = "transactional-id-expiration"


def end_txn_key(transactional_id: str) -> tuple:
    return ("end_txn", transactional_id)


class TxnMarkers(NamedTuple):
    """Markers to write for a transaction in PrepareCommit or PrepareAbort."""
    transactional_id: str
    producer_id: int
    producer_epoch: int  # under version 2, the epoch bumped by the Prepare record
    commit: bool
    partitions: tuple  # of (topic, partition), sorted
    transaction_version: int = 1

    def requests_by_partition(self) -> dict[tuple[str, int], WriteTxnMarkersRequest]:
        """One WriteTxnMarkers request for each partition leader of the transaction."""
        return {(topic, partition): WriteTxnMarkersRequest((WritableTxnMarker(
                    self.producer_id, self.producer_epoch, self.commit,
                    (WritableTxnMarkerTopic(topic, (partition,)),), transaction_version=self.transaction_version),))
                for topic, partition in self.partitions}


_PREPARE = (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)


class TransactionCoordinatorShard(CoordinatorShard):
    def __init__(self, context: CoordinatorContext) -> None:
        self.context = context
        config = {**DEFAULTS, **context.config}
        self.max_timeout_ms = int(config["transaction.max.timeout.ms"])
        self.abort_interval_ms = int(config["transaction.abort.timed.out.transaction.cleanup.interval.ms"])
        self.expiration_ms = int(config["transactional.id.expiration.ms"])
        self.expire_interval_ms = int(config["transaction.remove.expired.transaction.cleanup.interval.ms"])
        self.num_partitions = int(config["transaction.state.log.num.partitions"])
        self.offsets_partitions = int(config["offsets.topic.num.partitions"])
        self.transaction_version = int(config["transaction.version"])
        # Hard state: rebuilt by replay.
        self.transactions: dict[str, TransactionMetadata] = {}
        self.last_block_start: int | None = None
        # Soft state: the unused rest of the newest block. Never trusted after a load (ids from
        # it may have been handed out without a record), so a loaded shard starts a new block.
        self._next_producer_id: int | None = None
        self._block_end = 0

    # ------------------------------------------------------------------ replay and lifecycle

    def replay(self, offset: int, record: Record) -> None:
        key = record.key
        if isinstance(key, TransactionLogKey):
            if record.value is None:
                self.transactions.pop(key.transactional_id, None)
            else:
                self.transactions[key.transactional_id] = TransactionMetadata.from_value(key.transactional_id,
                                                                                         record.value)
        elif isinstance(key, ProducerIdBlockKey):
            # The operation that wrote the block handed out its first id.
            self.last_block_start = record.value.block_start
            self._next_producer_id = record.value.block_start + 1
            self._block_end = record.value.block_start + record.value.block_size
        else:
            raise ValueError(f"the transaction coordinator does not replay {type(key).__name__}")

    def on_loaded(self, now_ms: int) -> None:
        self._next_producer_id = None  # see __init__: the newest block may be partly used
        self._schedule_abort(now_ms + self.abort_interval_ms)
        self._schedule_expiry(now_ms + self.expire_interval_ms)

    def _schedule_abort(self, deadline_ms: int) -> None:
        self.context.timer.schedule(ABORT_TIMED_OUT_KEY, deadline_ms, self.abort_timed_out_transactions)

    def _schedule_expiry(self, deadline_ms: int) -> None:
        self.context.timer.schedule(EXPIRE_IDS_KEY, deadline_ms, self.expire_transactional_ids)

    # ------------------------------------------------------------------ helpers

    def _raise_if_not_owned(self, transactional_id: str) -> None:
        raise_if(partition_for(transactional_id, self.num_partitions) != self.context.partition,
                 Errors.NOT_COORDINATOR, f"{transactional_id} belongs to another transaction coordinator")

    def _allocate_producer_id(self) -> tuple[int, list[Record]]:
        """The next producer id, and the ProducerIdBlock record when a new block is needed.
        Blocks are striped over the coordinator partitions so that they never overlap. An id
        taken from the current block is used up even if the operation fails later (a gap is
        harmless); a new block is used only once its record is replayed, so an operation may
        allocate at most one id."""
        if self._next_producer_id is not None and self._next_producer_id < self._block_end:
            producer_id = self._next_producer_id
            self._next_producer_id += 1
            return producer_id, []
        index = 0 if self.last_block_start is None else \
            self.last_block_start // PRODUCER_ID_BLOCK_SIZE // self.num_partitions + 1
        start = (index * self.num_partitions + self.context.partition) * PRODUCER_ID_BLOCK_SIZE
        return start, [producer_id_block_record(self.context.partition, start, PRODUCER_ID_BLOCK_SIZE)]

    def _existing(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        """The checks every request of a running producer starts with."""
        raise_if(not transactional_id, Errors.INVALID_REQUEST, "a transactional id is required")
        self._raise_if_not_owned(transactional_id)
        txn = self.transactions.get(transactional_id)
        raise_if(txn is None or txn.producer_id != producer_id, Errors.INVALID_PRODUCER_ID_MAPPING,
                 f"producer id {producer_id} is not mapped to {transactional_id}")
        raise_if(txn.producer_epoch != producer_epoch, Errors.PRODUCER_FENCED,
                 f"epoch {producer_epoch} of {transactional_id} is fenced by epoch {txn.producer_epoch}")
        return txn

    @staticmethod
    def _record(txn: TransactionMetadata) -> Record:
        return transaction_log_record(txn.transactional_id, txn.to_value())

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(self, request: InitProducerIdRequest, now_ms: int) -> Result:
        tid = request.transactional_id
        if tid is None:
            producer_id, records = self._allocate_producer_id()
            return Result(records, InitProducerIdResponse(producer_id=producer_id, producer_epoch=0))
        raise_if(tid == "", Errors.INVALID_REQUEST, "the transactional id is empty")
        expected = self._expected_producer(request)
        timeout = request.transaction_timeout_ms
        raise_if(timeout <= 0 or timeout > self.max_timeout_ms, Errors.INVALID_TRANSACTION_TIMEOUT,
                 f"{timeout} ms is not in (0, transaction.max.timeout.ms={self.max_timeout_ms}]")
        self._raise_if_not_owned(tid)
        records: list[Record] = []
        txn = self.transactions.get(tid)
        if txn is None:
            producer_id, records = self._allocate_producer_id()
            txn = TransactionMetadata.new(tid, producer_id, timeout, now_ms)
        self._raise_if_fenced_on_init(txn, expected)

        if txn.state is TransactionState.ONGOING:
            # Abort the fenced producer's transaction first; the caller retries and gets the
            # epoch bumped once more (or a new producer id if that exhausts the epochs).
            fenced = txn.prepare_fence_producer_epoch(self.transaction_version, now_ms)
            return Result([self._record(fenced)],
                          InitProducerIdResponse(error_code=Errors.CONCURRENT_TRANSACTIONS.code))
        raise_if(txn.state in _PREPARE, Errors.CONCURRENT_TRANSACTIONS,
                 f"{tid} is completing a transaction ({txn.state.state_name})")
        if is_epoch_exhausted(txn.producer_epoch) and (expected is None or expected[1] == txn.producer_epoch):
            producer_id, more = self._allocate_producer_id()
            records += more
            new = txn.prepare_producer_id_rotation(producer_id, timeout, now_ms, expected is not None)
        else:
            new = txn.prepare_increment_producer_epoch(timeout, None if expected is None else expected[1], now_ms)
        records.append(self._record(new))
        return Result(records, InitProducerIdResponse(producer_id=new.producer_id, producer_epoch=new.producer_epoch))

    @staticmethod
    def _expected_producer(request: InitProducerIdRequest) -> tuple[int, int] | None:
        """Kafka refuses a request that gives only one of the producer id and epoch (the other
        being -1); any other pair, negative or not, is the producer's current one, and a pair
        the coordinator does not know is fenced like any other."""
        no_id, no_epoch = request.producer_id == NO_PRODUCER_ID, request.producer_epoch == NO_PRODUCER_EPOCH
        raise_if(no_id != no_epoch, Errors.INVALID_REQUEST, "producer id and epoch must be given together")
        return None if no_id else (request.producer_id, request.producer_epoch)

    @staticmethod
    def _raise_if_fenced_on_init(txn: TransactionMetadata, expected: tuple[int, int] | None) -> None:
        if expected is None:
            return
        producer_id, epoch = expected
        # A producer recovering from an unknown id gets the new metadata; a retry after a
        # rotation it never heard about names the previous id with an exhausted epoch.
        valid = (txn.producer_epoch == NO_PRODUCER_EPOCH or producer_id == txn.producer_id
                 or (producer_id == txn.previous_producer_id and is_epoch_exhausted(epoch)))
        raise_if(not valid, Errors.PRODUCER_FENCED, f"producer id {producer_id} is fenced")

    # ------------------------------------------------------------------ AddPartitionsToTxn, AddOffsetsToTxn

    def add_partitions_to_txn(self, request: AddPartitionsToTxnRequest, now_ms: int) -> Result:
        """Each transaction of the request succeeds or fails on its own; the error of a
        transaction is reported for each of its partitions, as Kafka does."""
        records: list[Record] = []
        results = []
        for txn_request in request.transactions:
            partitions = frozenset((t.name, p) for t in txn_request.topics for p in t.partitions)
            errors: dict = {}
            try:
                if txn_request.verify_only:
                    errors = self._verify(txn_request, partitions)
                else:
                    records += self._add_partitions(txn_request.transactional_id, txn_request.producer_id,
                                                    txn_request.producer_epoch, partitions, now_ms)
                error = Errors.NONE
            except KafkaError as e:
                error = e.error
            results.append(AddPartitionsToTxnResult(txn_request.transactional_id, tuple(
                AddPartitionsToTxnTopicResult(t.name, tuple(
                    AddPartitionsToTxnPartitionResult(p, errors.get((t.name, p), error).code) for p in t.partitions))
                for t in txn_request.topics)))
        return Result(records, AddPartitionsToTxnResponse(results_by_transaction=tuple(results)))

    def _add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        partitions: frozenset, now_ms: int) -> list[Record]:
        txn = self._existing(transactional_id, producer_id, producer_epoch)
        raise_if(txn.state in _PREPARE, Errors.CONCURRENT_TRANSACTIONS,
                 f"{transactional_id} is completing a transaction ({txn.state.state_name})")
        if txn.state is TransactionState.ONGOING and partitions <= txn.topic_partitions:
            return []  # already there: Kafka answers at once, with nothing to write
        return [self._record(txn.prepare_add_partitions(partitions, now_ms))]

    def _verify(self, txn_request: AddPartitionsToTxnTransaction, partitions: frozenset) -> dict:
        """A partition leader asks whether its partitions are in the producer's transaction
        (KIP-890 part 1). Past the producer and completion checks, each partition is answered
        on its own, whatever the state: NONE if it is in, TRANSACTION_ABORTABLE if not."""
        txn = self._existing(txn_request.transactional_id, txn_request.producer_id, txn_request.producer_epoch)
        raise_if(txn.state in _PREPARE, Errors.CONCURRENT_TRANSACTIONS, "the transaction is completing")
        return {tp: Errors.NONE if tp in txn.topic_partitions else Errors.TRANSACTION_ABORTABLE for tp in partitions}

    def add_offsets_to_txn(self, request: AddOffsetsToTxnRequest, now_ms: int) -> Result:
        """Adds the __consumer_offsets partition of the group, so that the transaction's offset
        commits are completed by the same markers."""
        raise_if(not request.group_id, Errors.INVALID_REQUEST, "a group id is required")
        partition = (OFFSETS_TOPIC, partition_for(request.group_id, self.offsets_partitions))
        records = self._add_partitions(request.transactional_id, request.producer_id, request.producer_epoch,
                                       frozenset([partition]), now_ms)
        return Result(records, AddOffsetsToTxnResponse())

    # ------------------------------------------------------------------ EndTxn and markers

    def end_txn(self, request: EndTxnRequest, now_ms: int) -> Result:
        raise_if(not request.transactional_id, Errors.INVALID_REQUEST, "a transactional id is required")
        self._raise_if_not_owned(request.transactional_id)
        if request.transaction_version >= TV_2:
            return self._end_txn_v2(request, now_ms)
        tid = request.transactional_id
        commit = request.committed
        txn = self._existing(tid, request.producer_id, request.producer_epoch)
        state = txn.state
        if state is TransactionState.ONGOING:
            prepared = txn.prepare_abort_or_commit(commit, request.transaction_version, NO_PRODUCER_ID, now_ms)
            return Result([self._record(prepared)], Deferred(end_txn_key(tid)))
        # A retry of an end that completed (or is completing) with the same outcome.
        if state is (TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT):
            return Result([], EndTxnResponse())
        raise_if(state is (TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT),
                 Errors.CONCURRENT_TRANSACTIONS, f"{tid} is already completing")
        raise KafkaError(Errors.INVALID_TXN_STATE,
                         f"{tid} is {state.state_name}: cannot {'commit' if commit else 'abort'}")

    def _end_txn_v2(self, request: EndTxnRequest, now_ms: int) -> Result:
        """EndTxn of transaction version 2. The producer's epoch is bumped by every end, so a
        retry names the epoch before the bump (or, after a rotation, the previous producer id
        at the last epoch) and gets the outcome again; an abort with no transaction running
        starts and aborts an empty one, for the epoch bump."""
        tid, commit, pid, epoch = (request.transactional_id, request.committed, request.producer_id,
                                   request.producer_epoch)
        txn = self.transactions.get(tid)
        raise_if(txn is None, Errors.INVALID_PRODUCER_ID_MAPPING, f"{tid} has no producer id")
        state = txn.state
        retry_on_overflow = (txn.previous_producer_id == pid and epoch == MAX_RETRY_EPOCH and txn.producer_epoch == 0)
        retry_on_bump = txn.producer_epoch == epoch + 1
        is_retry = retry_on_overflow or retry_on_bump
        if state in _PREPARE:
            valid_epoch = retry_on_bump
        elif state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            valid_epoch = is_retry or epoch == txn.producer_epoch
        else:
            valid_epoch = epoch == txn.producer_epoch
        raise_if(txn.producer_id != pid and not retry_on_overflow, Errors.INVALID_PRODUCER_ID_MAPPING,
                 f"producer id {pid} is not mapped to {tid}")
        raise_if(not valid_epoch, Errors.PRODUCER_FENCED,
                 f"epoch {epoch} of {tid} is fenced by epoch {txn.producer_epoch}")
        finished = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        preparing = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if state is TransactionState.ONGOING:
            return self._prepare_end(txn, commit, now_ms, no_partition_added=False)
        if state is finished and is_retry:
            return Result([], EndTxnResponse(producer_id=txn.producer_id, producer_epoch=txn.producer_epoch))
        if not commit and not is_retry and state in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                                                     TransactionState.COMPLETE_ABORT):
            return self._prepare_end(txn, False, now_ms, no_partition_added=True)
        raise_if(state is preparing, Errors.CONCURRENT_TRANSACTIONS, f"{tid} is already completing")
        raise KafkaError(Errors.INVALID_TXN_STATE,
                         f"{tid} is {state.state_name}: cannot {'commit' if commit else 'abort'}")

    def _prepare_end(self, txn: TransactionMetadata, commit: bool, now_ms: int, no_partition_added: bool) -> Result:
        """Version 2's Prepare record: epoch + 1, and a new producer id when that exhausts them."""
        records: list[Record] = []
        next_producer_id = NO_PRODUCER_ID
        if is_epoch_exhausted(txn.producer_epoch):
            next_producer_id, records = self._allocate_producer_id()
        prepared = txn.prepare_abort_or_commit(commit, TV_2, next_producer_id, now_ms, no_partition_added)
        return Result(records + [self._record(prepared)], Deferred(end_txn_key(txn.transactional_id)))

    def pending_markers(self) -> list[TxnMarkers]:
        """The transactions whose markers must be written, oldest update first."""
        pending = sorted((t for t in self.transactions.values() if t.state in _PREPARE),
                         key=lambda t: (t.txn_last_update_timestamp, t.transactional_id))
        return [TxnMarkers(t.transactional_id, t.producer_id, t.producer_epoch,
                           t.state is TransactionState.PREPARE_COMMIT, tuple(sorted(t.topic_partitions)),
                           TV_2 if t.supports_epoch_bump else 1)
                for t in pending]

    def markers_written(self, transactional_id: str) -> Result:
        """Every marker of the transaction is durable: release the EndTxn response that waited
        for them (if this coordinator still has it). Called before `complete_markers`, so
        that the answer does not wait for the Complete record's flush too. Under version 2 the
        answer names the producer id and epoch of the Complete record to come."""
        txn = self.transactions.get(transactional_id)
        response = EndTxnResponse()
        if txn is not None and txn.state in _PREPARE and txn.supports_epoch_bump:
            rotated = txn.next_producer_id != NO_PRODUCER_ID
            response = EndTxnResponse(producer_id=txn.next_producer_id if rotated else txn.producer_id,
                                      producer_epoch=0 if rotated else txn.producer_epoch)
        return Result([], None, [(end_txn_key(transactional_id), response)])

    def complete_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, now_ms: int) -> Result:
        """Every marker of the transaction is written: persist CompleteCommit/CompleteAbort."""
        txn = self._existing(transactional_id, producer_id, producer_epoch)
        raise_if(txn.state not in _PREPARE, Errors.INVALID_TXN_STATE,
                 f"{transactional_id} is {txn.state.state_name}, not preparing")
        return Result([self._record(txn.prepare_complete(now_ms))])

    # ------------------------------------------------------------------ timers

    def abort_timed_out_transactions(self, now_ms: int) -> Result:
        """Abort every ongoing transaction older than its timeout, fencing its producer."""
        self._schedule_abort(now_ms + self.abort_interval_ms)
        records = [self._record(t.prepare_fence_producer_epoch(self.transaction_version, now_ms))
                   for t in self.transactions.values()
                   if t.state is TransactionState.ONGOING and t.txn_start_timestamp + t.txn_timeout_ms < now_ms]
        return Result(records)

    def expire_transactional_ids(self, now_ms: int) -> Result:
        """Forget transactional ids idle for transactional.id.expiration.ms, with tombstones."""
        self._schedule_expiry(now_ms + self.expire_interval_ms)
        expired = [t for t in self.transactions.values()
                   if t.state.expiration_allowed and t.txn_last_update_timestamp <= now_ms - self.expiration_ms]
        return Result([transaction_log_tombstone(t.prepare_dead().transactional_id) for t in expired])

    # ------------------------------------------------------------------ reads

    def describe_transactions(self, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
        return DescribeTransactionsResponse(tuple(self._describe(tid) for tid in request.transactional_ids))

    def _describe(self, tid: str) -> DescribeTransactionsTransactionState:
        if not tid:
            return DescribeTransactionsTransactionState(Errors.INVALID_REQUEST.code, tid)
        if partition_for(tid, self.num_partitions) != self.context.partition:
            return DescribeTransactionsTransactionState(Errors.NOT_COORDINATOR.code, tid)
        txn = self.transactions.get(tid)
        if txn is None:
            return DescribeTransactionsTransactionState(Errors.TRANSACTIONAL_ID_NOT_FOUND.code, tid)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        return DescribeTransactionsTransactionState(
            Errors.NONE.code, tid, txn.state.state_name, txn.txn_timeout_ms, txn.txn_start_timestamp,
            txn.producer_id, txn.producer_epoch,
            tuple(DescribeTransactionsTopicData(t, tuple(ps)) for t, ps in by_topic.items()))

    def list_transactions(self, request: ListTransactionsRequest, now_ms: int) -> ListTransactionsResponse:
        states = {name: TransactionState.from_name(name) for name in request.state_filters}
        unknown = tuple(name for name, state in states.items() if state is None)
        wanted = {s for s in states.values() if s is not None}
        producer_ids = set(request.producer_id_filters)
        try:
            pattern = re.compile(request.transactional_id_pattern) if request.transactional_id_pattern else None
        except re.error:
            return ListTransactionsResponse(error_code=Errors.INVALID_REQUEST.code, unknown_state_filters=unknown)

        def include(t: TransactionMetadata) -> bool:
            return ((not states or t.state in wanted)
                    and (not producer_ids or t.producer_id in producer_ids)
                    and (request.duration_filter < 0 or now_ms - t.txn_start_timestamp > request.duration_filter)
                    and (pattern is None or pattern.fullmatch(t.transactional_id) is not None))

        listed = tuple(ListTransactionsTransactionState(t.transactional_id, t.producer_id, t.state.state_name)
                       for _, t in sorted(self.transactions.items()) if include(t))
        return ListTransactionsResponse(unknown_state_filters=unknown, transaction_states=listed)
