"""Between Kafka's record batches v2 and the batches shoal's partition logs store today
(runtime.topics.data: a msgpack array of [timestamp, key, value, headers] per batch).

The gateway converts at the edge: a produced v2 batch becomes one stored batch with the same
records, producer id, epoch and sequence; a fetched stored batch becomes one uncompressed v2
batch at the same base offset, a transaction marker a control batch. Kafka instead stores the
v2 batch and serves it back byte for byte; README "Kafka clients" says what that would take.
"""
from __future__ import annotations

from ..messages.topics import FetchedBatch, ProduceRequest
from ..topics.data import decode_control, decode_entries, encode_records
from .records import RecordBatch, control_record, encode_batch


def produce_request(topic: str, partition: int, batch: RecordBatch, acks: int, timeout_ms: int,
                    transactional_id: str | None) -> ProduceRequest:
    """The partition leader's request for one produced v2 batch."""
    return ProduceRequest(
        topic, partition,
        encode_records((r.timestamp, r.key, r.value, r.headers) for r in batch.records),
        len(batch.records), batch.max_timestamp, acks=acks, timeout_ms=timeout_ms,
        transactional_id=transactional_id, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence, is_transactional=batch.is_transactional)


def fetched_records(batch: FetchedBatch, timestamp: int = -1) -> bytes:
    """One stored batch as a v2 batch for a Kafka client."""
    if batch.is_control:
        commit, coordinator_epoch = decode_control(batch.records)
        return encode_batch([control_record(commit, coordinator_epoch, timestamp)], batch.base_offset,
                            producer_id=batch.producer_id, transactional=True, control=True)
    records = [(r.timestamp, r.key, r.value, r.headers) for r in decode_entries(batch.records, batch.base_offset)]
    return encode_batch(records, batch.base_offset, producer_id=batch.producer_id,
                        transactional=batch.is_transactional)
