"""Records of the transaction state log (__transaction_state-<n>).

TransactionLog (type 30) holds one transactional id's metadata, as Kafka's
TransactionLogKey/TransactionLogValue; a tombstone expires the id. ProducerIdBlock (type 31)
reserves a block of producer ids for this coordinator partition, so that ids handed out
before a restart are never handed out again.
"""
from __future__ import annotations

from typing import NamedTuple

from ..codec import Record, register


class TransactionLogKey(NamedTuple):
    transactional_id: str


class TransactionLogPartitions(NamedTuple):
    topic: str
    partition_ids: tuple


class TransactionLogValue(NamedTuple):
    producer_id: int
    previous_producer_id: int  # Kafka's lastProducerId: the id before a rotation, -1 if none
    next_producer_id: int  # version 2: the id a Prepare record rotates to at its Complete; -1 if none
    producer_epoch: int
    last_producer_epoch: int  # lets a retried InitProducerId get the epoch it already bumped to
    transaction_timeout_ms: int
    transaction_status: int  # TransactionState.id
    topic_partitions: tuple  # of TransactionLogPartitions, sorted
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    client_transaction_version: int = 0  # added later: older records read as 0 (version 1's behaviour)

    __nested__ = {"topic_partitions": [TransactionLogPartitions]}


class ProducerIdBlockKey(NamedTuple):
    partition: int  # the coordinator partition that owns the blocks


class ProducerIdBlockValue(NamedTuple):
    block_start: int
    block_size: int


register(30, TransactionLogKey, TransactionLogValue)
register(31, ProducerIdBlockKey, ProducerIdBlockValue)


def transaction_log_record(transactional_id: str, value: TransactionLogValue) -> Record:
    return Record(TransactionLogKey(transactional_id), value)


def transaction_log_tombstone(transactional_id: str) -> Record:
    return Record(TransactionLogKey(transactional_id))


def producer_id_block_record(partition: int, block_start: int, block_size: int) -> Record:
    return Record(ProducerIdBlockKey(partition), ProducerIdBlockValue(block_start, block_size))
