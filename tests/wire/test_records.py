"""Record batch v2 against kafka-python's own record code (kafka.record): what its
producer's builder writes we read, what we write its consumer reads, with every codec."""
import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from runtime.errors import Errors, KafkaError
from runtime.wire.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from runtime.wire.records import Record, control_record, decode_batch, decode_batches, encode_batch

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

RECORDS = [
    (1700000000000, b"k0", b"v0", [("h", b"1"), ("empty", None)]),
    (1700000000005, None, b"value without key", []),
    (1699999999000, b"k2", None, [("trace", b"\x00\xff")]),  # a tombstone with an older time
    (1700000000010, b"big", b"x" * 70000, []),  # over one xerial snappy block
]


def kafka_python_batch(codec, producer=(-1, -1, -1), transactional=False):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                        producer_id=producer[0], producer_epoch=producer[1],
                                        base_sequence=producer[2], batch_size=1 << 20)
    for i, (ts, key, value, headers) in enumerate(RECORDS):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_what_kafka_python_writes(codec):
    batch, end = decode_batch(kafka_python_batch(codec, producer=(7, 2, 40)))
    assert end == len(kafka_python_batch(codec, producer=(7, 2, 40)))
    assert batch.compression == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 2, 40)
    assert batch.last_offset == 3 and batch.max_timestamp == 1700000000010
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch.records] == \
        [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(RECORDS)]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_what_we_write(codec):
    data = encode_batch([(ts, k, v, tuple(h)) for ts, k, v, h in RECORDS], base_offset=100, compression=codec,
                        producer_id=9, producer_epoch=1, base_sequence=5, transactional=True)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert (batch.base_offset, batch.compression_type, batch.is_transactional) == (100, codec, True)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 1, 5)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(100 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(RECORDS)]


def test_records_keep_their_offsets():
    records = [Record(10, 5, b"a", b"1"), Record(12, 6, b"b", b"2")]  # offset 11 compacted away
    [batch] = decode_batches(encode_batch(records, base_offset=10))
    assert batch.records == tuple(records) and batch.last_offset == 12


def test_a_control_batch_is_read_by_kafka_python_as_a_marker():
    data = encode_batch([control_record(True, 3, 1000)], base_offset=50, producer_id=4, producer_epoch=0,
                        transactional=True, control=True)
    batch = DefaultRecordBatch(data)
    assert batch.is_control_batch
    [marker] = list(batch)
    assert marker.commit and not marker.abort


def test_batches_follow_each_other():
    data = kafka_python_batch(NONE) + encode_batch([(1, b"k", b"v", ())], base_offset=4)
    assert [b.base_offset for b in decode_batches(data)] == [0, 4]


def corrupt(data: bytes) -> Errors:
    with pytest.raises(KafkaError) as e:
        decode_batches(data)
    return e.value.error


@pytest.mark.parametrize("codec", CODECS)
def test_a_flipped_byte_is_a_crc_mismatch(codec):
    data = bytearray(kafka_python_batch(codec))
    data[-3] ^= 0x01
    assert corrupt(bytes(data)) is Errors.CORRUPT_MESSAGE


def test_truncated_batches_are_corrupt():
    data = kafka_python_batch(GZIP)
    for cut in (10, 60, len(data) - 1):
        assert corrupt(data[:cut]) is Errors.CORRUPT_MESSAGE


def test_an_undecompressible_body_is_corrupt():
    # A gzip batch whose body is not gzip, with a CRC that matches it.
    data = encode_batch([(1, b"k", b"v", ())])
    forged = bytearray(data)
    struct.pack_into(">h", forged, 21, GZIP)
    from crc32c import crc32c
    struct.pack_into(">I", forged, 17, crc32c(bytes(forged[21:])))
    assert corrupt(bytes(forged)) is Errors.CORRUPT_MESSAGE


def test_a_record_count_that_lies_is_corrupt():
    data = bytearray(encode_batch([(1, b"k", b"v", ()), (2, b"k", b"v", ())]))
    struct.pack_into(">i", data, 57, 3)
    from crc32c import crc32c
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    assert corrupt(bytes(data)) is Errors.CORRUPT_MESSAGE


def test_an_old_magic_is_an_invalid_record():
    data = bytearray(encode_batch([(1, b"k", b"v", ())]))
    data[16] = 1
    assert corrupt(bytes(data)) is Errors.INVALID_RECORD
