"""Kafka's record batch format v2 (magic 2): decode and encode.

A batch: base offset, length, partition leader epoch, magic, CRC32C of everything after
the CRC, attributes (compression in bits 0-2, timestamp type 3, transactional 4, control 5),
last offset delta, base and max timestamps, producer id, epoch and base sequence, then the
record count and the records, compressed as one block when the batch is. A record is
varint-framed: attributes, timestamp and offset deltas, key, value, and headers (a string
key, a bytes value). Malformed or corrupt data is CORRUPT_MESSAGE, as a broker answers it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from ..errors import Errors, KafkaError
from .compression import NONE, compress, decompress

MAGIC = 2
ATTR_COMPRESSION = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

# base offset, length, leader epoch, magic, crc, attributes, last offset delta,
# base timestamp, max timestamp, producer id, producer epoch, base sequence, record count
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_CRC_START = 21  # the attributes' position: the CRC covers from here to the end
_LENGTH_OFFSET = 12  # the batch length counts the bytes after itself
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")


@dataclass(frozen=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()  # (str, bytes | None) pairs


class _Attributes:
    """What a batch's attributes say, for the classes that carry them."""

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)


@dataclass(frozen=True)
class RecordBatch(_Attributes):
    base_offset: int
    records: tuple[Record, ...]
    attributes: int = 0
    last_offset_delta: int = 0
    base_timestamp: int = -1
    max_timestamp: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    partition_leader_epoch: int = -1

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def _corrupt(message: str) -> KafkaError:
    return KafkaError(Errors.CORRUPT_MESSAGE, message)


# ------------------------------------------------------------------ varints (zigzag)

def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    # The hot loop of decoding a produced batch: a one-byte varint returns at once, and
    # running off the end is caught once rather than checked at every byte.
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        result, shift = b & 0x7F, 7
        while True:
            pos += 1
            b = buf[pos]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1), pos + 1
            shift += 7
            if shift > 63:
                raise _corrupt("a varint longer than ten bytes")
    except IndexError:
        raise _corrupt("a varint runs past its record") from None


def _write_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    size, pos = _read_varint(buf, pos)
    if size < 0:
        return None, pos
    if pos + size > len(buf):
        raise _corrupt("a key, value or header runs past its record")
    return buf[pos:pos + size], pos + size


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(value))
        out += value


# ------------------------------------------------------------------ decode

def _read_records(buf: bytes, count: int) -> list[tuple]:
    """(offset delta, timestamp delta, key, value, headers) of each record. The hot loop of
    checking a produced batch: a one-byte varint (most attributes, deltas, lengths of a
    null key and header counts) is read in line, without a call."""
    records, pos, size = [], 0, len(buf)
    try:
        for _ in range(count):
            b = buf[pos]
            length, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _read_varint(buf, pos)
            end = pos + length
            if length < 0 or end > size:
                raise _corrupt("a record runs past its batch")
            b = buf[pos + 1]  # after the record attributes, unused
            ts_delta, pos = ((b >> 1) ^ -(b & 1), pos + 2) if b < 0x80 else _read_varint(buf, pos + 1)
            b = buf[pos]
            offset_delta, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _read_varint(buf, pos)
            key, pos = _read_bytes(buf, pos)
            value, pos = _read_bytes(buf, pos)
            b = buf[pos]
            header_count, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _read_varint(buf, pos)
            headers = ()
            if header_count > 0:
                pairs = []
                for _ in range(header_count):
                    name, pos = _read_bytes(buf, pos)
                    header_value, pos = _read_bytes(buf, pos)
                    if name is None:
                        raise _corrupt("a header without a key")
                    try:
                        pairs.append((name.decode(), header_value))
                    except UnicodeDecodeError:
                        raise _corrupt("a header key is not UTF-8") from None
                headers = tuple(pairs)
            if pos != end:
                raise _corrupt("a record's length does not match its fields")
            records.append((offset_delta, ts_delta, key, value, headers))
    except IndexError:
        raise _corrupt("a record runs past its batch") from None
    if pos != size:
        raise _corrupt("bytes after a batch's last record")
    return records


@dataclass(frozen=True, slots=True)
class BatchHeader(_Attributes):
    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    crc: int
    end: int  # the position after the batch


def batch_header(data: bytes, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`, its length checked against the data but not its
    CRC: another magic than 2 raises INVALID_RECORD (Produce v3 and later carry magic 2
    only), a truncated batch CORRUPT_MESSAGE."""
    if len(data) - pos < HEADER_SIZE:
        raise _corrupt("a truncated batch header")
    (base_offset, length, leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts,
     producer_id, producer_epoch, base_sequence, count) = _HEADER.unpack_from(data, pos)
    if magic != MAGIC:
        raise KafkaError(Errors.INVALID_RECORD, f"record batch magic {magic}, only magic 2 is served")
    end = pos + _LENGTH_OFFSET + length
    if length < HEADER_SIZE - _LENGTH_OFFSET or end > len(data):
        raise _corrupt("a batch runs past its data")
    if count < 0:
        raise _corrupt("a negative record count")
    return BatchHeader(base_offset, leader_epoch, attributes, last_delta, base_ts, max_ts, producer_id,
                       producer_epoch, base_sequence, count, crc, end)


def read_batch(data: bytes, pos: int = 0) -> tuple[BatchHeader, list[tuple]]:
    """The header of the batch at `pos` and its records as (offset delta, timestamp delta,
    key, value, headers), checked whole: a CRC that does not match, a truncated batch or
    malformed records raise CORRUPT_MESSAGE; another magic than 2 raises INVALID_RECORD."""
    h = batch_header(data, pos)
    if crc32c(memoryview(data)[pos + _CRC_START:h.end]) != h.crc:
        raise _corrupt("record batch CRC mismatch")
    body = decompress(h.attributes & ATTR_COMPRESSION, bytes(data[pos + HEADER_SIZE:h.end]))
    return h, _read_records(body, h.record_count)


def decode_batch(data: bytes, pos: int = 0) -> tuple[RecordBatch, int]:
    """The batch at `pos` (checked as `read_batch` does) and the position after it."""
    h, records = read_batch(data, pos)
    base, base_ts = h.base_offset, h.base_timestamp
    return RecordBatch(base, tuple(Record(base + od, base_ts + td, k, v, hs) for od, td, k, v, hs in records),
                       h.attributes, h.last_offset_delta, base_ts, h.max_timestamp, h.producer_id,
                       h.producer_epoch, h.base_sequence, h.partition_leader_epoch), h.end


def with_base_offset(data: bytes, base_offset: int, partition_leader_epoch: int) -> bytes:
    """One batch with the offset and leader epoch a partition leader gives it on append.
    Both sit before the bytes the CRC covers, so the batch stays valid as it is."""
    return _BASE_OFFSET.pack(base_offset) + data[8:12] + _LEADER_EPOCH.pack(partition_leader_epoch) + data[16:]


def decode_batches(data: bytes) -> list[RecordBatch]:
    out, pos = [], 0
    while pos < len(data):
        batch, pos = decode_batch(data, pos)
        out.append(batch)
    return out


# ------------------------------------------------------------------ encode

def encode_batch(records, base_offset: int = 0, *, compression: int = NONE, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
                 control: bool = False, partition_leader_epoch: int = -1) -> bytes:
    """One batch of `records`: (timestamp, key, value, headers) tuples, or Records whose
    offsets are kept (as deltas from base_offset). Timestamps are CreateTime."""
    records = list(records)
    if not records:
        raise ValueError("a record batch holds at least one record")
    timestamps = [r[0] if not isinstance(r, Record) else r.timestamp for r in records]
    base_ts = timestamps[0]
    body = bytearray()
    last_delta = 0
    for i, r in enumerate(records):
        if isinstance(r, Record):
            offset_delta, ts, key, value, headers = r.offset - base_offset, r.timestamp, r.key, r.value, r.headers
        else:
            offset_delta, (ts, key, value, headers) = i, r
        last_delta = offset_delta
        rec = bytearray(b"\x00")
        _write_varint(rec, ts - base_ts)
        _write_varint(rec, offset_delta)
        _write_bytes(rec, key)
        _write_bytes(rec, value)
        _write_varint(rec, len(headers))
        for name, header_value in headers:
            _write_bytes(rec, name.encode())
            _write_bytes(rec, header_value)
        _write_varint(body, len(rec))
        body += rec
    payload = compress(compression, bytes(body))
    attributes = compression | (ATTR_TRANSACTIONAL if transactional else 0) | (ATTR_CONTROL if control else 0)
    header = bytearray(_HEADER.pack(base_offset, HEADER_SIZE - _LENGTH_OFFSET + len(payload), partition_leader_epoch,
                                    MAGIC, 0, attributes, last_delta, base_ts, max(timestamps), producer_id,
                                    producer_epoch, base_sequence, len(records)))
    crc = crc32c(bytes(header[_CRC_START:]) + payload)
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + payload


# ------------------------------------------------------------------ control records

_CONTROL_KEY = struct.Struct(">hh")  # version, type (0 abort, 1 commit)
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch


def control_record(commit: bool, coordinator_epoch: int, timestamp: int) -> tuple:
    """The one record of a transaction marker batch (Kafka's EndTransactionMarker)."""
    return (timestamp, _CONTROL_KEY.pack(0, 1 if commit else 0), _CONTROL_VALUE.pack(0, coordinator_epoch), ())
