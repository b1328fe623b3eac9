"""Carries the transaction manager's requests to the coordinators and its answers back.

Every decision (states, producer id and epoch, which request comes next) is made by the
sans-I/O `runtime.clients.transaction_manager.TransactionManager`; this shell only finds
the coordinator, makes the call (retrying while a coordinator moves, loads or finishes the
previous transaction) and hands the response in. The user's thread calls
`init_transactions`, `begin_transaction` and the end of a transaction; the producer's
sender thread calls `producer_id_and_epoch`, `add_partitions` and `batch_failed`. One lock
guards the core; no Ray call is made while it is held.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from runtime.clients.transaction_manager import TransactionManager as TransactionManagerCore
from runtime.clients.transaction_manager import TxnState
from runtime.errors import Errors, KafkaError
from runtime.hashing import partition_for
from runtime.messages.txn import EndTxnRequest

from .. import naming
from ..errors import RETRIABLE_COORDINATOR_ERRORS

__all__ = ["TransactionManager", "TxnState"]

_RETRY_ON = RETRIABLE_COORDINATOR_ERRORS | {Errors.CONCURRENT_TRANSACTIONS}
_CONCURRENT_TRANSACTIONS_BACKOFF_S = 0.02  # the previous transaction is still writing its markers


class TransactionManager:
    def __init__(self, cluster, client_id: str, transactional_id: str | None, transaction_timeout_ms: int,
                 max_block_ms: int) -> None:
        self._cluster = cluster
        self._client_id = client_id
        self._max_block_s = max_block_ms / 1000
        self._offsets_partitions = int(cluster.config["offsets.topic.num.partitions"])
        self.core = TransactionManagerCore(
            transactional_id, transaction_timeout_ms=transaction_timeout_ms,
            transaction_version=int(cluster.config.get("transaction.version", 2)),
            offsets_partition_for=lambda group_id: partition_for(group_id, self._offsets_partitions))
        self._lock = threading.Lock()

    @property
    def transactional_id(self) -> str | None:
        return self.core.transactional_id

    @property
    def transactional(self) -> bool:
        return self.core.transactional

    @property
    def transaction_version(self) -> int:
        return self.core.transaction_version

    @property
    def starts_at_sequence_zero(self) -> bool:
        return self.core.starts_at_sequence_zero

    @property
    def state(self) -> TxnState:
        return self.core.state

    def _decide(self, fn, *args) -> Any:
        with self._lock:
            return fn(*args)

    def _call(self, method: str, request: Any, group_id: str | None = None, in_transaction: bool = False) -> Any:
        """Call the transaction coordinator (or the group's coordinator); a failed call
        (after the retries) goes to the core before it is raised: one made for the open
        transaction fails the transaction."""
        if group_id is None:
            key = self.core.transactional_id if self.core.transactional else self._client_id
            name = naming.transaction_coordinator(
                partition_for(key, int(self._cluster.config["transaction.state.log.num.partitions"])))
        else:
            name = naming.group_coordinator(partition_for(group_id, self._offsets_partitions))
        try:
            return self._cluster.directory.call(name, method, request, timeout_s=self._max_block_s,
                                                retry_on=_RETRY_ON)
        except KafkaError as e:
            self._decide(self.core.transaction_request_failed if in_transaction else self.core.request_failed, e)
            raise

    # ------------------------------------------------------------------ the user's thread

    def init_transactions(self) -> None:
        request = self._decide(self.core.init_transactions)
        self._decide(self.core.handle_init_producer_id, self._call("init_producer_id", request))

    def begin_transaction(self) -> None:
        self._decide(self.core.begin_transaction)

    def send_offsets_to_transaction(self, offsets: dict, group_metadata) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator."""
        add = self._decide(self.core.send_offsets_to_transaction,
                           group_metadata if isinstance(group_metadata, str) else group_metadata.group_id)
        commit = self._decide(self.core.handle_add_offsets, self._call("add_offsets_to_txn", add, in_transaction=True),
                              offsets, group_metadata)
        self._decide(self.core.handle_txn_offset_commit,
                     self._call("txn_offset_commit", commit, group_id=commit.group_id, in_transaction=True))

    def raise_if_cannot_send(self) -> None:
        self._decide(self.core.raise_if_cannot_send)

    def begin_completion(self, commit: bool) -> None:
        """Stop sends; the producer flushes next, then calls `end_transaction`."""
        self._decide(self.core.begin_commit if commit else self.core.begin_abort)

    def end_transaction(self) -> None:
        """EndTxn (and an epoch bump where one is due) once every batch of the transaction
        is acknowledged or failed."""
        while True:
            request = self._decide(self.core.end_txn_request)
            response = None
            if request is not None:
                response = self._call("end_txn" if isinstance(request, EndTxnRequest) else "init_producer_id", request)
            if self._decide(self.core.handle_end, response):
                return

    # ------------------------------------------------------------------ the sender thread

    def producer_id_and_epoch(self, busy: bool) -> tuple[int, int]:
        """The id and epoch for batches numbered now (getting an id first if need be)."""
        request = self._decide(self.core.producer_id_request, busy)
        if request is not None:
            self._decide(self.core.handle_init_producer_id, self._call("init_producer_id", request))
        return self.core.producer_id, self.core.producer_epoch

    def add_partitions(self, partitions: set[tuple[str, int]]) -> None:
        """AddPartitionsToTxn for the partitions the transaction writes to for the first time."""
        request = self._decide(self.core.add_partitions_request, partitions)
        deadline = time.monotonic() + self._max_block_s
        while request is not None:
            again = self._decide(self.core.handle_add_partitions, request, self._call("add_partitions_to_txn", request,
                                                                                 in_transaction=True))
            if not again:
                return
            if time.monotonic() >= deadline:
                error = KafkaError(Errors.CONCURRENT_TRANSACTIONS, "AddPartitionsToTxn failed")
                self._decide(self.core.transaction_request_failed, error)
                raise error
            time.sleep(_CONCURRENT_TRANSACTIONS_BACKOFF_S)

    def batch_failed(self, error: KafkaError, sent: bool) -> None:
        self._decide(self.core.batch_failed, error, sent)
