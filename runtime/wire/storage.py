"""Between the Kafka wire protocol and shoal's partition logs (runtime.topics.data).

A produced v2 batch is passed to its partition leader as it came, with the record count,
timestamp and producer fields its header gives; the leader checks it whole (CRC and every
record) and stores it. A fetched batch that a Kafka client produced is served as stored;
one that shoal's producer wrote (msgpack) is encoded as one uncompressed v2 batch at the
same offsets, and a transaction marker as a control batch.
"""
from __future__ import annotations

from ..messages.topics import FetchedBatch, ProduceRequest
from ..topics.data import decode_control, decode_entries, is_kafka_batch
from .records import batch_header, control_record, encode_batch


def produce_request(topic: str, partition: int, records: bytes, acks: int, timeout_ms: int,
                    transactional_id: str | None) -> ProduceRequest:
    """The partition leader's request for one produced v2 batch, from its header alone: the
    leader checks the whole batch (runtime.topics.data.validate_payload)."""
    h = batch_header(records)
    return ProduceRequest(
        topic, partition, bytes(records), h.record_count, h.max_timestamp, acks=acks, timeout_ms=timeout_ms,
        transactional_id=transactional_id, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence, is_transactional=h.is_transactional)


def fetched_records(batch: FetchedBatch, timestamp: int = -1) -> bytes:
    """One stored batch as a v2 batch for a Kafka client."""
    if batch.is_control:
        commit, coordinator_epoch = decode_control(batch.records)
        return encode_batch([control_record(commit, coordinator_epoch, timestamp)], batch.base_offset,
                            producer_id=batch.producer_id, transactional=True, control=True)
    if is_kafka_batch(batch.records):
        return batch.records
    records = [(r.timestamp, r.key, r.value, r.headers) for r in decode_entries(batch.records, batch.base_offset)]
    return encode_batch(records, batch.base_offset, producer_id=batch.producer_id,
                        transactional=batch.is_transactional)
