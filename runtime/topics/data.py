"""The entries of a topic partition's data log.

A data batch's payload is a msgpack array of entries ``[timestamp, key, value, headers]``
(key and value are bytes or nil, headers a list of ``[name, bytes]``). The producer encodes
a batch once; the leader appends it as is and fetch returns it as is.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

import msgpack

from ..errors import Errors, KafkaError

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


def validate_payload(payload: bytes, record_count: int) -> int:
    """Check that a produced payload is what it claims; returns its largest timestamp."""
    try:
        entries = msgpack.unpackb(payload, use_list=False, raw=False)
    except Exception as e:
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"the records do not decode: {e}") from None
    if not isinstance(entries, tuple) or len(entries) != record_count or not entries:
        raise KafkaError(Errors.INVALID_RECORD, f"expected {record_count} records")
    max_ts = -1
    for e in entries:
        if not (isinstance(e, tuple) and len(e) == 4 and isinstance(e[0], int)
                and (e[1] is None or isinstance(e[1], bytes)) and (e[2] is None or isinstance(e[2], bytes))):
            raise KafkaError(Errors.INVALID_RECORD, "a record is not [timestamp, key, value, headers]")
        if e[0] > max_ts:
            max_ts = e[0]
    return max_ts


def decode_entries(payload: bytes, base_offset: int) -> list[DataRecord]:
    entries = msgpack.unpackb(payload, use_list=False, raw=False)
    return [DataRecord(base_offset + i, ts, k, v, tuple((h[0], h[1]) for h in hs))
            for i, (ts, k, v, hs) in enumerate(entries)]


# Control records (transaction markers) written by the transaction coordinator.
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def encode_control(commit: bool, coordinator_epoch: int, timestamp: int) -> bytes:
    return msgpack.packb([[CONTROL_COMMIT if commit else CONTROL_ABORT, coordinator_epoch, timestamp]])


def decode_control(payload: bytes) -> tuple[bool, int]:
    ((kind, coordinator_epoch, _ts),) = msgpack.unpackb(payload, use_list=False)
    return kind == CONTROL_COMMIT, coordinator_epoch
