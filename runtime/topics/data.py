"""The payloads of a topic partition's data log, in one of two forms.

* shoal's producer writes a msgpack array of entries ``[timestamp, key, value, headers]``
  (key and value are bytes or nil, headers a list of ``[name, bytes]``);
* a Kafka client's produce (through the gateway) is stored as the record batch v2 it sent,
  compression and all, with the base offset the leader gave it, and served back byte for
  byte, as Kafka does.

The first byte tells them apart: a msgpack array header is 0x90 or above, a v2 batch begins
with its base offset, a non-negative int64, so below 0x80. Every reader goes through
`decode_entries`, so each reads what any producer wrote.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

import msgpack

from ..errors import Errors, KafkaError, RecordErrors
from ..messages.topics import ProduceRequest
from ..wire.records import read_batch, with_base_offset

_packb = msgpack.Packer(use_bin_type=True).pack


class DataRecord(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple


def encode_entry(timestamp: int, key: bytes | None, value: bytes | None, headers=()) -> bytes:
    """One entry, packed; a batch is ``pack_batch`` of several of these."""
    return _packb([timestamp, key, value, [list(h) for h in headers] if headers else []])


def pack_batch(entries: list[bytes]) -> bytes:
    return msgpack.Packer().pack_array_header(len(entries)) + b"".join(entries)


def encode_records(records: Iterable[tuple]) -> bytes:
    """Records as (timestamp, key, value, headers) tuples → a batch payload."""
    return pack_batch([encode_entry(*r) for r in records])


def is_kafka_batch(payload: bytes) -> bool:
    return bool(payload) and payload[0] < 0x80


def validate_payload(request: ProduceRequest, keys_required: bool = False) -> int:
    """Check that a produced payload is what its request claims; returns its largest
    timestamp. A Kafka batch must also carry the request's producer id, epoch, sequence and
    transactional flag, which the producer state is kept by. `keys_required` (a compacted
    topic): a record without a key is refused, and with it its batch (RecordErrors)."""
    if is_kafka_batch(request.records):
        max_ts, keys = _validate_kafka_batch(request)
    else:
        max_ts, keys = _validate_entries(request)
    if keys_required:
        _raise_for_missing_keys(request, keys)
    return max_ts


def _raise_for_missing_keys(request: ProduceRequest, keys: Iterable) -> None:
    where = f"{request.topic}-{request.partition}"
    missing = [(i, f"Compacted topic cannot accept message without key in topic partition {where}.")
               for i, key in enumerate(keys) if key is None]
    if missing:
        raise RecordErrors(missing)


def _validate_entries(request: ProduceRequest) -> tuple[int, list]:
    try:
        entries = msgpack.unpackb(request.records, use_list=False, raw=False)
    except Exception as e:
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"the records do not decode: {e}") from None
    if not isinstance(entries, tuple) or len(entries) != request.record_count or not entries:
        raise KafkaError(Errors.INVALID_RECORD, f"expected {request.record_count} records")
    max_ts = -1
    for e in entries:
        if not (isinstance(e, tuple) and len(e) == 4 and isinstance(e[0], int)
                and (e[1] is None or isinstance(e[1], bytes)) and (e[2] is None or isinstance(e[2], bytes))):
            raise KafkaError(Errors.INVALID_RECORD, "a record is not [timestamp, key, value, headers]")
        if e[0] > max_ts:
            max_ts = e[0]
    return max_ts, [e[1] for e in entries]


def _validate_kafka_batch(request: ProduceRequest) -> tuple[int, list]:
    # As Kafka's LogValidator: the CRC and every record are checked (CORRUPT_MESSAGE), and
    # a batch a producer may not write is INVALID_RECORD.
    h, records = read_batch(request.records)
    if h.end != len(request.records):
        raise KafkaError(Errors.INVALID_RECORD, "a produce carries one record batch per partition")
    if h.is_control:
        raise KafkaError(Errors.INVALID_RECORD, "a producer may not write a control batch")
    if not records or len(records) != request.record_count:
        raise KafkaError(Errors.INVALID_RECORD, f"expected {request.record_count} records")
    if h.last_offset_delta != len(records) - 1 or any(r[0] != i for i, r in enumerate(records)):
        raise KafkaError(Errors.INVALID_RECORD, "the records' offset deltas are not 0, 1, 2, ...")
    if (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) != (
            request.producer_id, request.producer_epoch, request.base_sequence, request.is_transactional):
        raise KafkaError(Errors.INVALID_RECORD, "the batch's producer fields differ from the request's")
    return h.base_timestamp + max(r[1] for r in records), [r[2] for r in records]


def stored_payload(payload: bytes, base_offset: int) -> bytes:
    """What the log stores for a validated payload appended at base_offset."""
    if is_kafka_batch(payload):
        # No leader epoch (-1), as a producer sends it and as shoal's batches are served:
        # shoal serves no OffsetForLeaderEpoch, so a consumer has no use for one.
        return with_base_offset(payload, base_offset, -1)
    return payload


def decode_entries(payload: bytes, base_offset: int) -> list[DataRecord]:
    return [DataRecord(*row) for row in decode_rows(payload, base_offset)]


def decode_rows(payload: bytes, base_offset: int) -> list[tuple]:
    """A batch payload's records as plain (offset, timestamp, key, value, headers) tuples,
    DataRecord's fields: the consumers' data path makes one per record fetched, and
    DataRecord's constructor (Python code) took a sixth of the consumer actor's time."""
    if is_kafka_batch(payload):
        h, records = read_batch(payload)
        base_ts = h.base_timestamp
        return [(base_offset + i, base_ts + td, k, v, hs) for i, (_, td, k, v, hs) in enumerate(records)]
    entries = msgpack.unpackb(payload, use_list=False, raw=False)
    # use_list=False: the headers are already a tuple of (key, value) tuples.
    return [(base_offset + i, ts, k, v, hs) for i, (ts, k, v, hs) in enumerate(entries)]


# Control records (transaction markers) written by the transaction coordinator.
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def encode_control(commit: bool, coordinator_epoch: int, timestamp: int) -> bytes:
    return msgpack.packb([[CONTROL_COMMIT if commit else CONTROL_ABORT, coordinator_epoch, timestamp]])


def decode_control(payload: bytes) -> tuple[bool, int]:
    ((kind, coordinator_epoch, _ts),) = msgpack.unpackb(payload, use_list=False)
    return kind == CONTROL_COMMIT, coordinator_epoch
